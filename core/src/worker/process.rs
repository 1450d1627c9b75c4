//! One delivery's lifecycle inside the worker: run, classify, decide, act.

use std::{
    future::Future,
    time::{Duration, Instant, SystemTime},
};

use tracing::Instrument;

use super::{Counters, Ctx, Handler, Step, handler::run_once};
use crate::{
    decide::{Decision, decide},
    envelope::{Envelope, RetryState},
    failure::{Classified, Failure, Reason},
    transport::{Delivery, Settle, Unsettled},
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
///
/// A plain function returning the instrumented future, not an `async fn`
/// around it: awaiting inside one more async body would hold the lifecycle
/// future twice (before and after it is moved into the instrumentation).
pub(super) fn process<H: Handler>(
    ctx: &Ctx<H>,
    delivery: Delivery,
) -> impl Future<Output = Option<Halt>> + Send + '_ {
    let span = tracing::info_span!(
        "parkway.message",
        transport = ctx.transport.kind(),
        source = %delivery.message.route,
        message_id = delivery.message.id.as_deref().unwrap_or("-"),
        attempt = tracing::field::Empty,
    );
    lifecycle(ctx, delivery, span.clone()).instrument(span)
}

/// The first attempt, kept small: this future lives inline in every
/// consumer's, and under load nearly every message succeeds here. A failure
/// continues in [`failed`], boxed, so the retry machinery (timers, the
/// envelope record, several settlements) adds nothing to the size that
/// each message's future is moved at.
///
/// A plain function around an `async move` block, not an `async fn`: an
/// `async fn` keeps its arguments twice in its future (as passed and as
/// moved into its body), and this future is moved per message.
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn would hold its arguments twice"
)]
fn lifecycle<H: Handler>(
    ctx: &Ctx<H>,
    delivery: Delivery,
    span: tracing::Span,
) -> impl Future<Output = Option<Halt>> + Send + '_ {
    async move {
        // Only the due time and the reconciled state are kept across the
        // handler's run; a failure decodes the envelope again.
        let (state, due_at) = {
            let envelope = Envelope::decode(&delivery.message.headers);
            let state = envelope.retry_state_at(delivery.broker_attempts, || ctx.clock.now());
            (state, envelope.due_at)
        };
        if let Some(due) = due_at {
            let wait = Box::pin(wait_until_due(ctx, &delivery, due));
            wait.await;
        }
        match attempt(ctx, &delivery, &state, &span).await {
            Ok(()) => {
                succeeded(ctx, delivery, &state).await;
                None
            }
            Err(failure) => {
                let envelope = Envelope::decode(&delivery.message.headers);
                let rest = Box::pin(failed(ctx, delivery, envelope, state, failure, span));
                rest.await
            }
        }
    }
}

/// Runs the handler once, timed.
async fn attempt<H: Handler>(
    ctx: &Ctx<H>,
    delivery: &Delivery,
    state: &RetryState,
    span: &tracing::Span,
) -> Result<(), Failure> {
    span.record("attempt", state.attempts.saturating_add(1));
    let started = Instant::now();
    let result = run_once(&ctx.handler, &delivery.message, ctx.handler_timeout).await;
    ctx.meters
        .handler_duration
        .record(started.elapsed().as_secs_f64());
    result
}

/// Counts a success and acknowledges; the async part is the settlement's.
fn succeeded<'a, H: Send + Sync>(
    ctx: &'a Ctx<H>,
    delivery: Delivery,
    state: &RetryState,
) -> impl Future<Output = bool> + Send + 'a {
    let named = ctx.router.route(&delivery.message.route);
    observe(ctx, &delivery, &named.name, state, None, None);
    if state.first_failure_at.is_some() {
        metrics::histogram!("parkway_retry_age_seconds", "transport" => ctx.transport.kind())
            .record(state.age(ctx.clock.now()).as_secs_f64());
    }
    settle(ctx, delivery, Settle::Ack, "acked", &ctx.counters.acked)
}

/// From a failed attempt on: classify, decide, and retry in process (then
/// run again) or settle.
async fn failed<H: Handler>(
    ctx: &Ctx<H>,
    delivery: Delivery,
    mut envelope: Envelope,
    mut state: RetryState,
    mut failure: Failure,
    span: tracing::Span,
) -> Option<Halt> {
    let kind = ctx.transport.kind();
    let named = ctx.router.route(&delivery.message.route);
    let policy = &named.policy;
    loop {
        let now = ctx.clock.now();
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
        match attempt(ctx, &delivery, &state, &span).await {
            Ok(()) => {
                succeeded(ctx, delivery, &state).await;
                return None;
            }
            Err(f) => failure = f,
        }
    }
}

/// Records the failure in the envelope and encodes it into new headers.
fn record<H>(
    ctx: &Ctx<H>,
    envelope: &mut Envelope,
    delivery: &Delivery,
    state: &RetryState,
    classified: &Classified,
    failure: &Failure,
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
async fn wait_until_due<H>(ctx: &Ctx<H>, delivery: &Delivery, due: SystemTime) {
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
///
/// The transport's (boxed) future is made before the async part, so what
/// is awaited holds a pointer, not the delivery and the action again.
fn settle<'a, H>(
    ctx: &'a Ctx<H>,
    delivery: Delivery,
    action: Settle,
    outcome: &'static str,
    counter: &'a std::sync::atomic::AtomicU64,
) -> impl Future<Output = bool> + Send + 'a
where
    H: Send + Sync,
{
    let sent = ctx.transport.settle(delivery, action);
    async move {
        let unsettled = match sent.await {
            Ok(()) => {
                Counters::bump(counter);
                ctx.meters.settled(outcome);
                return true;
            }
            Err(unsettled) => unsettled,
        };
        // Boxed, and the refusal moved into the box before the wait: kept
        // out of the size of every settlement's future (awaited inside the
        // `match`, the refusal would be held beside it).
        let rest = Box::pin(not_accepted(ctx, unsettled));
        rest.await;
        false
    }
}

/// Counts a settlement the broker did not accept and hands the delivery
/// back, unless handing back is what failed.
async fn not_accepted<H>(ctx: &Ctx<H>, unsettled: Unsettled) {
    Counters::bump(&ctx.counters.unsettled);
    ctx.meters.settled("unsettled");
    tracing::warn!(
        error = %unsettled.error,
        action = unsettled.action,
        "settlement not accepted; the message stays with the broker for redelivery"
    );
    if unsettled.action == "release" {
        return;
    }
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

fn observe<H>(
    ctx: &Ctx<H>,
    delivery: &Delivery,
    policy: &str,
    state: &RetryState,
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
