//! One delivery's lifecycle inside the worker: run, classify, decide, act.

use std::time::{Duration, Instant};

use tracing::Instrument;

use super::{Counters, Ctx, Handler, Step, handler::run_once};
use crate::{
    decide::{Decision, decide},
    envelope::Envelope,
    failure::{Classified, Reason},
    transport::{Delivery, Settle},
};

/// A delivery whose policy says halt.
#[derive(Debug)]
pub(super) struct Halt {
    pub(super) policy: String,
    pub(super) route: String,
    pub(super) message_id: String,
    pub(super) reason: Reason,
}

/// Processes one delivery to its settlement; returns a halt if the policy
/// asked for one.
pub(super) async fn process<H: Handler>(ctx: &Ctx<H>, delivery: Delivery) -> Option<Halt> {
    let span = tracing::info_span!(
        "parkway.message",
        transport = ctx.transport.kind(),
        source = %delivery.message.route,
        message_id = delivery.message.id.as_deref().unwrap_or("-"),
        attempt = tracing::field::Empty,
    );
    lifecycle(ctx, delivery, &span)
        .instrument(span.clone())
        .await
}

async fn lifecycle<H: Handler>(
    ctx: &Ctx<H>,
    delivery: Delivery,
    span: &tracing::Span,
) -> Option<Halt> {
    let kind = ctx.transport.kind();
    let named = ctx.router.route(&delivery.message.route).clone();
    let policy = &named.policy;
    let mut envelope = Envelope::decode(&delivery.message.headers);
    let mut state = envelope.retry_state(delivery.broker_attempts, ctx.clock.now());
    wait_until_due(ctx, &delivery, &envelope).await;
    loop {
        span.record("attempt", state.attempts.saturating_add(1));
        let started = Instant::now();
        let result = run_once(&ctx.handler, &delivery.message, ctx.handler_timeout).await;
        ctx.meters
            .handler_duration
            .record(started.elapsed().as_secs_f64());
        let now = ctx.clock.now();
        let failure = match result {
            Ok(()) => {
                observe(ctx, &delivery, &named.name, &state, None, None);
                if state.first_failure_at.is_some() {
                    metrics::histogram!("parkway_retry_age_seconds", "transport" => kind)
                        .record(state.age(now).as_secs_f64());
                }
                settle(ctx, delivery, Settle::Ack, "acked", &ctx.counters.acked).await;
                return None;
            }
            Err(f) => f,
        };
        let classified = ctx.classifier.classify(&failure);
        let decision = decide(policy, &state, &classified, now, ctx.dice.roll());
        tracing::debug!(
            reason = %classified.reason,
            class = %classified.class,
            decision = decision.name(),
            delay_ms = decision.delay().map(|d| d.as_millis() as u64),
            "attempt failed"
        );
        observe(
            ctx,
            &delivery,
            &named.name,
            &state,
            Some(&classified),
            Some(&decision),
        );
        if decision.delay().is_some() {
            metrics::counter!("parkway_retry_attempts_total", "transport" => kind, "reason" => classified.reason.to_string())
                .increment(1);
        }
        metrics::histogram!("parkway_retry_age_seconds", "transport" => kind)
            .record(state.age(now).as_secs_f64());
        match decision {
            Decision::RetryLocal(d) => {
                hold(ctx, &delivery, d).await;
                tokio::time::sleep(d).await;
                state.local_attempt = state.local_attempt.saturating_add(1);
            }
            Decision::Pause(d) => {
                stamp(ctx, &mut envelope, &delivery);
                envelope.record_failure(&state, &classified, &failure.describe(), now, Some(d));
                hold(ctx, &delivery, d).await;
                tokio::time::sleep(d).await;
                state = state.after_wait(now, d);
            }
            Decision::RetryLater(delay) => {
                let headers = record(
                    ctx,
                    &mut envelope,
                    &delivery,
                    &state,
                    &classified,
                    &failure,
                    Some(delay),
                );
                let action = Settle::Retry { delay, headers };
                settle(ctx, delivery, action, "retried", &ctx.counters.retried).await;
                return None;
            }
            Decision::Park(reason) => {
                let headers = record(
                    ctx,
                    &mut envelope,
                    &delivery,
                    &state,
                    &classified,
                    &failure,
                    None,
                );
                if settle(
                    ctx,
                    delivery,
                    Settle::Park { headers },
                    "parked",
                    &ctx.counters.parked,
                )
                .await
                {
                    metrics::counter!("parkway_parked_total", "transport" => kind, "reason" => reason.to_string())
                        .increment(1);
                }
                return None;
            }
            Decision::Discard(reason) => {
                if settle(
                    ctx,
                    delivery,
                    Settle::Discard,
                    "discarded",
                    &ctx.counters.discarded,
                )
                .await
                {
                    metrics::counter!("parkway_discarded_total", "transport" => kind, "reason" => reason.to_string())
                        .increment(1);
                }
                return None;
            }
            Decision::Ack => {
                settle(
                    ctx,
                    delivery,
                    Settle::Ack,
                    "duplicate",
                    &ctx.counters.duplicates,
                )
                .await;
                return None;
            }
            Decision::Halt(reason) => {
                metrics::counter!("parkway_halted_total", "transport" => kind, "policy" => named.name.clone())
                    .increment(1);
                if ctx.transport.capabilities().halts_in_place {
                    // Only this lane stops: the transport keeps the delivery
                    // unacknowledged where it is until an operator acts.
                    let origin = &delivery.origin;
                    tracing::error!(
                        reason = %reason,
                        policy = %named.name,
                        queue = origin.queue.as_deref().unwrap_or("-"),
                        partition = origin.partition,
                        offset = origin.offset,
                        "retry budget spent; halting this lane until an operator resumes it or skips it to the parking lot"
                    );
                    let headers = record(
                        ctx,
                        &mut envelope,
                        &delivery,
                        &state,
                        &classified,
                        &failure,
                        None,
                    );
                    let action = Settle::Halt { headers };
                    settle(ctx, delivery, action, "halted", &ctx.counters.halted).await;
                    return None;
                }
                tracing::error!(reason = %reason, policy = %named.name, "retry budget spent; halting the worker");
                let halt = Halt {
                    policy: named.name.clone(),
                    route: delivery.message.route.clone(),
                    message_id: delivery.message.id.clone().unwrap_or_else(|| "-".into()),
                    reason,
                };
                settle(
                    ctx,
                    delivery,
                    Settle::Release,
                    "halted",
                    &ctx.counters.released,
                )
                .await;
                return Some(halt);
            }
        }
    }
}

/// Records the failure in the envelope and encodes it into new headers.
fn record<H>(
    ctx: &Ctx<H>,
    envelope: &mut Envelope,
    delivery: &Delivery,
    state: &crate::envelope::RetryState,
    classified: &Classified,
    failure: &crate::failure::Failure,
    delay: Option<Duration>,
) -> crate::envelope::Headers {
    stamp(ctx, envelope, delivery);
    let now = ctx.clock.now();
    envelope.record_failure(state, classified, &failure.describe(), now, delay);
    let mut headers = delivery.message.headers.clone();
    envelope.encode(&mut headers, &ctx.limits);
    headers
}

/// Fills the identity fields the envelope does not have yet.
fn stamp<H>(ctx: &Ctx<H>, envelope: &mut Envelope, delivery: &Delivery) {
    let msg = &delivery.message;
    if envelope.origin.queue.is_none() {
        envelope.origin = delivery.origin.clone();
    }
    envelope.message_id = envelope.message_id.take().or_else(|| msg.id.clone());
    envelope.correlation_id = envelope
        .correlation_id
        .take()
        .or_else(|| msg.correlation_id.clone());
    envelope.message_type = envelope
        .message_type
        .take()
        .or_else(|| msg.message_type.clone());
    if ctx.handler_version.is_some() {
        envelope.handler_version.clone_from(&ctx.handler_version);
    }
}

/// A retry that arrives early (tiered delays round down to a tier) waits
/// here for the rest of its delay, within the worker's early-hold limit.
async fn wait_until_due<H>(ctx: &Ctx<H>, delivery: &Delivery, envelope: &Envelope) {
    let Some(due) = envelope.due_at else { return };
    let Ok(wait) = due.duration_since(ctx.clock.now()) else {
        return;
    };
    if !wait.is_zero() && wait <= ctx.early_hold_limit {
        hold(ctx, delivery, wait).await;
        tokio::time::sleep(wait).await;
    }
}

async fn hold<H>(ctx: &Ctx<H>, delivery: &Delivery, d: Duration) {
    if let Err(error) = ctx.transport.hold(delivery, d).await {
        tracing::warn!(%error, "could not extend the delivery's lease while holding it");
    }
}

/// Settles, counting the outcome; on failure hands the delivery back so the
/// broker delivers it again. Returns whether the settlement was accepted.
async fn settle<H>(
    ctx: &Ctx<H>,
    delivery: Delivery,
    action: Settle,
    outcome: &'static str,
    counter: &std::sync::atomic::AtomicU64,
) -> bool {
    match ctx.transport.settle(delivery, action).await {
        Ok(()) => {
            Counters::bump(counter);
            ctx.meters.settled(outcome);
            true
        }
        Err(unsettled) => {
            Counters::bump(&ctx.counters.unsettled);
            ctx.meters.settled("unsettled");
            tracing::warn!(
                error = %unsettled.error,
                action = unsettled.action,
                "settlement not accepted; the message stays with the broker for redelivery"
            );
            if unsettled.action != "release" {
                if let Err(again) = ctx
                    .transport
                    .settle(unsettled.delivery, Settle::Release)
                    .await
                {
                    tracing::warn!(error = %again.error, "release failed too; the broker will redeliver when the lease ends");
                } else {
                    Counters::bump(&ctx.counters.released);
                }
            }
            false
        }
    }
}

fn observe<H>(
    ctx: &Ctx<H>,
    delivery: &Delivery,
    policy: &str,
    state: &crate::envelope::RetryState,
    failure: Option<&Classified>,
    decision: Option<&Decision>,
) {
    if let Some(observer) = &ctx.observer {
        observer(&Step {
            message_id: delivery.message.id.clone(),
            route: delivery.message.route.clone(),
            policy: policy.to_owned(),
            attempt: state.attempts.saturating_add(1),
            local_attempt: state.local_attempt,
            failure: failure.map(|f| (f.class, f.reason.clone())),
            decision: decision.cloned(),
        });
    }
}
