//! The redrive run: selection, limit, pacing and canary over any lot.

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{Filter, RedriveOptions, RedriveReport, ReplayRequest};
use crate::{
    envelope::EnvelopeLimits,
    transport::{Choice, Parked, ParkingLot, Selector, TransportError},
};

/// Runs one redrive over `lot`. Returns the report; a transport error that
/// stops the sweep is returned as an error (moves done so far stay done, and
/// nothing is lost: unmoved messages stay parked).
///
/// ```
/// # #[allow(dead_code)] async fn run(lot: &dyn parkway_core::ParkingLot) -> Result<(), Box<dyn std::error::Error>> {
/// use parkway_core::{EnvelopeLimits, redrive::{redrive, Filter, RedriveOptions, ReplayRequest}};
/// let report = redrive(
///     lot,
///     &Filter::default().reason("DOWNSTREAM_TIMEOUT"),
///     &RedriveOptions::default().limit(10),
///     &ReplayRequest::new("alice", "dependency fixed")?,
///     &EnvelopeLimits::default(),
/// ).await?;
/// println!("{report}");
/// # Ok(()) }
/// ```
pub async fn redrive(
    lot: &dyn ParkingLot,
    filter: &Filter,
    options: &RedriveOptions,
    replay: &ReplayRequest,
    limits: &EnvelopeLimits,
) -> Result<RedriveReport, TransportError> {
    let mut report = RedriveReport {
        replay_id: replay.id.clone(),
        dry_run: options.dry_run,
        ..RedriveReport::default()
    };
    if options.dry_run {
        let all = lot.browse(usize::MAX).await?;
        report.scanned = all.len();
        report.matched = all.iter().filter(|p| filter.matches(p)).count();
        report.left = report.matched;
        audit(replay, &report);
        return Ok(report);
    }
    let limit = options.limit.unwrap_or(usize::MAX);
    let mut mover = Mover {
        filter,
        replay,
        limits,
        budget: limit,
        stop_at_budget: false,
        pacer: Pacer::new(options.rate),
        report: &mut report,
    };
    if let Some(canary) = options.canary {
        mover.budget = canary.count.min(limit);
        mover.stop_at_budget = true;
        lot.sweep(&mut mover).await?;
        let canary_moved = mover.report.moved;
        if canary_moved > 0 {
            tokio::time::sleep(canary.wait).await;
            let again = lot
                .browse(usize::MAX)
                .await?
                .iter()
                .filter(|p| {
                    p.envelope
                        .replay
                        .as_ref()
                        .is_some_and(|r| r.id == replay.id)
                })
                .count();
            mover.report.failed_again = again;
            metrics::counter!("parkway_redrive_failures_total").increment(again as u64);
            let pct = again as f64 * 100.0 / canary_moved as f64;
            if pct > canary.max_failure_percent {
                mover.report.aborted = Some(format!(
                    "canary: {again} of {canary_moved} moved messages were parked again ({pct:.0}% > {}%)",
                    canary.max_failure_percent
                ));
            }
        }
        mover.budget = limit.saturating_sub(canary_moved);
        mover.stop_at_budget = false;
    }
    if mover.report.aborted.is_none() {
        lot.sweep(&mut mover).await?;
    } else {
        // Count what the abort leaves behind, without moving anything.
        let left = lot.browse(usize::MAX).await?;
        let not_ours = |p: &&Parked| p.envelope.replay.as_ref().is_none_or(|r| r.id != replay.id);
        mover.report.matched += left
            .iter()
            .filter(not_ours)
            .filter(|p| filter.matches(p))
            .count();
    }
    report.left = report.matched.saturating_sub(report.moved);
    audit(replay, &report);
    Ok(report)
}

fn audit(replay: &ReplayRequest, report: &RedriveReport) {
    tracing::info!(
        target: "parkway::audit",
        replay_id = %replay.id,
        replayed_by = %replay.by,
        replay_reason = %replay.reason,
        dry_run = report.dry_run,
        matched = report.matched,
        moved = report.moved,
        left = report.left,
        failed = report.failed,
        failed_again = report.failed_again,
        aborted = report.aborted.as_deref().unwrap_or(""),
        "redrive finished"
    );
}

struct Mover<'a> {
    filter: &'a Filter,
    replay: &'a ReplayRequest,
    limits: &'a EnvelopeLimits,
    /// Moves still allowed in this sweep.
    budget: usize,
    /// End the sweep once the budget is spent (canary) rather than finish
    /// counting matches.
    stop_at_budget: bool,
    pacer: Pacer,
    report: &'a mut RedriveReport,
}

#[async_trait]
impl Selector for Mover<'_> {
    async fn choose(&mut self, parked: &Parked) -> Choice {
        if self.stop_at_budget && self.budget == 0 {
            return Choice::Stop;
        }
        self.report.scanned += 1;
        let ours = parked
            .envelope
            .replay
            .as_ref()
            .is_some_and(|r| r.id == self.replay.id);
        if ours || !self.filter.matches(parked) {
            return Choice::Keep;
        }
        self.report.matched += 1;
        if self.budget == 0 {
            return Choice::Keep;
        }
        self.budget -= 1;
        self.pacer.wait().await;
        let env = parked.envelope.clone().into_replay(
            &self.replay.id,
            &self.replay.by,
            &self.replay.reason,
        );
        let mut headers = parked.message.headers.clone();
        env.encode(&mut headers, self.limits);
        Choice::Move(headers)
    }

    fn moved(&mut self, parked: &Parked, result: Result<(), TransportError>) {
        match result {
            Ok(()) => {
                self.report.moved += 1;
                metrics::counter!("parkway_redrive_total").increment(1);
            }
            Err(error) => {
                self.report.failed += 1;
                metrics::counter!("parkway_redrive_failures_total").increment(1);
                tracing::warn!(%error, parked_id = %parked.id, "redrive move failed; message stays parked");
            }
        }
    }
}

/// Spaces moves `1 / rate` seconds apart.
struct Pacer {
    interval: Option<Duration>,
    next: Option<Instant>,
}

impl Pacer {
    fn new(rate: Option<f64>) -> Self {
        Pacer {
            interval: rate.and_then(|r| Duration::try_from_secs_f64(1.0 / r).ok()),
            next: None,
        }
    }

    async fn wait(&mut self) {
        let Some(interval) = self.interval else {
            return;
        };
        let now = Instant::now();
        let at = self.next.map_or(now, |n| n.max(now));
        tokio::time::sleep_until(at).await;
        self.next = Some(at + interval);
    }
}
