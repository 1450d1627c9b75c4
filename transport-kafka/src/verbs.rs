//! The transport verbs on Kafka: `receive` hands out the next runnable
//! record (a due retry, or a source record its partition's mode allows);
//! `settle` commits only after a retry or parked copy's delivery report.

use std::{
    sync::{Arc, atomic::Ordering as AtomicOrdering},
    time::Duration,
};

use async_trait::async_trait;
use parkway_core::{
    Capabilities, DelayMode, Delivery, ErrorKind, Headers, Message, ParkingLot, Settle, Transport,
    TransportError, Unsettled,
};
use tokio::time::Instant;

use crate::{
    KIND,
    headers::copy_of,
    state::Taken,
    token::Token,
    transport::{Inner, KafkaTransport, lock, revoked},
};

#[async_trait]
impl Transport for KafkaTransport {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_delay: Some(crate::MAX_DELAY),
            delay_mode: DelayMode::Exact {
                granularity: Duration::from_millis(5),
            },
            ordered: true,
            native_redrive: false,
            halts_in_place: true,
        }
    }

    async fn receive(&self) -> Result<Option<Delivery>, TransportError> {
        let mut one = None;
        take(&self.inner, 1, |d| one = Some(d)).await?;
        Ok(one)
    }

    async fn receive_many(
        &self,
        into: &mut Vec<Delivery>,
        max: usize,
    ) -> Result<usize, TransportError> {
        take(&self.inner, max.max(1), |d| into.push(d)).await
    }

    async fn settle(&self, delivery: Delivery, action: Settle) -> Result<(), Unsettled> {
        let result = match delivery.token::<Token>() {
            Some(token) => settle_token(&self.inner, token, &delivery.message, &action).await,
            None => Err(TransportError::foreign_delivery(KIND)),
        };
        result.map_err(|error| Unsettled::new(&action, error, delivery))
    }

    fn parking_lot(&self) -> &dyn ParkingLot {
        &self.lot
    }

    fn describe(&self) -> Vec<String> {
        let c = &self.inner.config;
        let tiers: Vec<String> = self.inner.plan.labels().map(|l| c.tier_topic(l)).collect();
        vec![
            format!(
                "brokers {}, group `{}`, source topic `{}`",
                c.bootstrap_servers, c.group_id, c.topic
            ),
            format!(
                "retry tiers: {} — each record carries its due time and is held until then",
                if tiers.is_empty() {
                    "none".to_owned()
                } else {
                    tiers.join(", ")
                }
            ),
            format!(
                "dead-letter topic `{}`, replay index `{}` (compacted)",
                c.dlt(),
                c.replayed_topic()
            ),
            format!(
                "mode: {}",
                if self.inner.ordered {
                    "pause-partition (one record in flight per partition, retried in place)"
                } else {
                    "retry topics"
                }
            ),
        ]
    }
}

/// Carries out `action` on the record behind `token`.
async fn settle_token(
    inner: &Arc<Inner>,
    token: &Token,
    message: &Message,
    action: &Settle,
) -> Result<(), TransportError> {
    match action {
        Settle::Ack | Settle::Discard => inner.finish(token),
        Settle::Release => {
            let mut s = lock(&inner.state);
            match s.get_mut(&token.topic, token.partition) {
                Some(p) if p.epoch == token.epoch => {
                    p.release(token.record(message));
                    drop(s);
                    inner.ready.notify_one();
                    Ok(())
                }
                _ => Err(revoked()),
            }
        }
        Settle::Retry { delay, headers } => {
            let tier = inner
                .plan
                .tier_for(*delay)
                .map(|l| inner.config.tier_topic(l));
            let topic = tier.unwrap_or_else(|| inner.config.topic.clone());
            copy_then_finish(inner, token, message, &topic, headers).await
        }
        Settle::Park { headers } => {
            copy_then_finish(inner, token, message, &inner.config.dlt(), headers).await
        }
        Settle::Halt { headers } => inner
            .halt(token, message, headers)
            .map(|h| crate::control::announce(inner, &h)),
        _ => Err(TransportError::new(
            KIND,
            ErrorKind::Unsupported,
            format!("settlement {}", action.name()),
        )),
    }
}

/// Waits for runnable records and hands up to `max` to `push` as
/// deliveries; returns how many, `0` once the transport is closed.
async fn take(
    inner: &Arc<Inner>,
    max: usize,
    mut push: impl FnMut(Delivery) + Send,
) -> Result<usize, TransportError> {
    if inner.closed.load(AtomicOrdering::SeqCst) {
        return Ok(0);
    }
    inner.start().await?;
    let mut taken = Vec::with_capacity(max);
    // The first look takes without registering for a wake-up: under load a
    // record is almost always there, and registering costs two turns of the
    // notifier's lock that every consumer shares.
    let mut registered = false;
    loop {
        let ready = inner.ready.notified();
        tokio::pin!(ready);
        if registered {
            ready.as_mut().enable();
        }
        if inner.closed.load(AtomicOrdering::SeqCst) {
            return Ok(0);
        }
        let next_due = take_runnable(inner, max, &mut taken);
        if !taken.is_empty() {
            // The pump wakes one consumer per burst, not one per record:
            // leaving to run what it took, this one hands the watch on if
            // anything is left (more than it could carry, or retries still
            // waiting for their time, which someone must wake up for).
            if taken.len() == max || next_due.is_some() {
                inner.ready.notify_one();
            }
            let n = taken.len();
            for t in taken {
                push(inner.delivery(t));
            }
            return Ok(n);
        }
        if !registered {
            // Look again once registered, so a record placed in between is
            // not missed.
            registered = true;
            continue;
        }
        match next_due {
            Some(due) => {
                tokio::select! {
                    () = &mut ready => {}
                    () = tokio::time::sleep_until(due) => {}
                }
            }
            None => ready.await,
        }
    }
}

/// Takes up to `max` runnable records under one lock; returns when the
/// next waiting retry record is due.
fn take_runnable(inner: &Inner, max: usize, taken: &mut Vec<Taken>) -> Option<Instant> {
    let mut s = lock(&inner.state);
    let now = Instant::now();
    let bound = inner.config.buffer_per_partition;
    let generation = inner.finishes.generation();
    while taken.len() < max {
        let Some(t) = s.take(now, inner.ordered, generation) else {
            break;
        };
        let r = &t.record;
        if let Some(p) = s.at_mut(t.slot) {
            if p.paused && p.halted.is_none() && p.buffered() <= bound / 2 {
                p.paused = false;
                inner.set_fetching(&r.topic, r.partition, true);
            }
            if p.buffered() + 1 == bound {
                inner.drained.notify_one();
            }
        }
        taken.push(t);
    }
    s.next_due()
}

/// Produces the record's copy with `headers` to `topic` and, once its
/// delivery report is in, marks the original finished.
async fn copy_then_finish(
    inner: &Inner,
    token: &Token,
    message: &Message,
    topic: &str,
    headers: &Headers,
) -> Result<(), TransportError> {
    // No copy for a record whose partition moved on: its new owner runs it.
    // (Every other settlement checks this under the lock it takes anyway.)
    if !inner.current(token) {
        return Err(revoked());
    }
    let copy = copy_of(token.raw_headers.as_ref(), headers);
    let key = token.key(message);
    // Boxed: the produce future is large, and inline it would make every
    // settle's (boxed) future large, acks included.
    let sent = Box::pin(inner.produce(topic, Some(token.partition), key, &message.body, copy));
    sent.await?;
    inner.finish(token)
}
