//! `parkway parked redrive`: move parked messages back, as a controlled and
//! audited operation.
//!
//! The selection, limit, pacing, canary, replay headers and the audit log
//! line are core's ([`parkway::redrive::redrive`]); this command turns flags
//! into options, shows progress on a terminal, prints the report, and maps
//! the outcome to an exit code (see `parkway --help`).

use std::{
    io::IsTerminal,
    time::{Duration, SystemTime},
};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use parkway::redrive::{Canary, RedriveOptions, RedriveReport, ReplayRequest, redrive};
use serde_json::json;

use super::{filter::FilterArgs, progress::Ticking, view::Output};
use crate::{ConfigArg, exit, exit::CliError, logging, session};

/// `parkway parked redrive` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigArg,
    #[command(flatten)]
    filter: FilterArgs,
    /// Count what would move; move nothing.
    #[arg(long)]
    dry_run: bool,
    /// Move at most N messages.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Move at most R messages a second.
    #[arg(long, value_name = "R")]
    rate: Option<f64>,
    /// Move N messages first, wait --canary-wait, and stop (exit 3) if more
    /// than --canary-max-failure percent of them were parked again.
    #[arg(long, value_name = "N")]
    canary: Option<usize>,
    /// How long the canary's messages get to be processed.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    canary_wait: Duration,
    /// The share of canary messages that may fail again, in percent.
    #[arg(long, value_name = "PERCENT", default_value_t = 0.0)]
    canary_max_failure: f64,
    /// Who runs the redrive (written to every moved message and the audit
    /// line).
    #[arg(long, value_name = "NAME")]
    operator: String,
    /// Why the messages are replayed (written to every moved message and the
    /// audit line), e.g. "inventory-service fixed".
    #[arg(long, value_name = "TEXT")]
    replay_reason: String,
    /// `table` or `json` for the final report.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    output: Output,
}

fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (e.g. 30s, 2m)"))
}

/// Runs the redrive and reports.
pub(crate) async fn run(args: &Args) -> Result<u8, CliError> {
    let path = &args.config.config;
    let config = session::load(path)?;
    let filter = args.filter.filter(SystemTime::now())?;
    let options = options(args)?;
    let replay = ReplayRequest::new(&args.operator, &args.replay_reason)
        .map_err(|e| CliError::usage(e.to_string()))?;
    session::needs_broker(&config, path, "redrive")?;
    let transport = session::connect_lot(&config, path).await?;
    let lot = transport.parking_lot();
    let bar = if std::io::stderr().is_terminal() && !args.dry_run {
        let matched = lot
            .browse(usize::MAX)
            .await
            .map_err(|e| CliError::transport("cannot read the parking lot", &e))?
            .iter()
            .filter(|p| filter.matches(p))
            .count();
        let total = args.limit.map_or(matched, |l| l.min(matched));
        let bar = ProgressBar::with_draw_target(
            Some(u64::try_from(total).unwrap_or(u64::MAX)),
            ProgressDrawTarget::stderr(),
        );
        if let Ok(style) =
            ProgressStyle::with_template("{bar:40} {pos}/{len} moved, {per_sec} {msg}")
        {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let ticking = Ticking {
        lot,
        bar: bar.clone(),
    };
    logging::set_bar(Some(bar.clone()));
    let result = redrive(&ticking, &filter, &options, &replay, &config.limits).await;
    logging::set_bar(None);
    bar.finish_and_clear();
    let report = result.map_err(|e| {
        CliError::transport(
            "redrive stopped by a broker error (messages moved so far stay moved; the rest stay parked)",
            &e,
        )
    })?;
    print_report(&report, args);
    Ok(code(&report))
}

fn options(args: &Args) -> Result<RedriveOptions, CliError> {
    let mut o = RedriveOptions::default().dry_run(args.dry_run);
    if let Some(n) = args.limit {
        o = o.limit(n);
    }
    if let Some(r) = args.rate {
        o = o
            .rate(r)
            .map_err(|e| CliError::usage(format!("--rate {r}: {e}")))?;
    }
    if let Some(n) = args.canary {
        let canary = Canary::new(n, args.canary_wait, args.canary_max_failure)
            .map_err(|e| CliError::usage(format!("--canary {n}: {e}")))?;
        o = o.canary(canary);
    }
    Ok(o)
}

/// 0 done, 3 canary abort, 4 some moves failed.
fn code(report: &RedriveReport) -> u8 {
    if report.aborted.is_some() {
        exit::CANARY
    } else if report.failed > 0 {
        exit::PARTIAL
    } else {
        exit::OK
    }
}

fn print_report(r: &RedriveReport, args: &Args) {
    match args.output {
        Output::Json => out!(
            "{}",
            json!({
                "replay_id": r.replay_id,
                "dry_run": r.dry_run,
                "operator": args.operator,
                "replay_reason": args.replay_reason,
                "scanned": r.scanned,
                "matched": r.matched,
                "moved": r.moved,
                "left": r.left,
                "failed": r.failed,
                "failed_again": r.failed_again,
                "aborted": r.aborted,
                "exit_code": code(r),
            })
        ),
        Output::Table => {
            out!("redrive {r}");
            if r.dry_run {
                let would = args.limit.map_or(r.matched, |l| l.min(r.matched));
                out!("dry run: would move {would} message(s); nothing changed");
            } else if let Some(why) = &r.aborted {
                out!("stopped: {why}; the rest stay parked");
            } else if r.failed > 0 {
                out!("{} move(s) failed; those messages stay parked", r.failed);
            }
        }
    }
}
