//! Taking deliveries: as many as a consumer has free slots, in one
//! receive, each placed in its lane when some policy is ordered.
//!
//! Why here and not in the consumer's loop: a take runs beside the
//! deliveries the consumer is already running (see `run`), so it is a
//! future of its own that owns its slots, and a receive failure is waited
//! out inside it while the running work goes on.

use std::{
    collections::VecDeque,
    sync::{Arc, atomic::Ordering as AtomicOrdering},
    time::Duration,
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{
    Handler,
    run::{Shared, Stop},
};
use crate::{policy::Ordering, transport::Delivery};

/// Deliveries one consumer takes at once, at most: one lock and one
/// wake-up of the transport for several messages, while batches stay small
/// enough that the slots spread over the consumers.
pub(super) const MAX_BATCH: usize = 16;

/// Every free slot up to a batch, without waiting; `None` if there is none.
pub(super) fn free_slots(permits: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
    up_to(permits, MAX_BATCH)
}

/// `permit` and whatever other slots are free, up to a batch.
pub(super) fn with_more(
    permits: &Arc<Semaphore>,
    mut permit: OwnedSemaphorePermit,
) -> OwnedSemaphorePermit {
    if let Some(more) = up_to(permits, MAX_BATCH - 1) {
        permit.merge(more);
    }
    permit
}

fn up_to(permits: &Arc<Semaphore>, n: usize) -> Option<OwnedSemaphorePermit> {
    let free = u32::try_from(permits.available_permits().min(n))
        .ok()
        .filter(|free| *free > 0)?;
    permits.clone().try_acquire_many_owned(free).ok()
}

/// What one take brought: deliveries to run, extra ones to hand back, or
/// why there were none.
pub(super) enum Took {
    Batch {
        admitted: Vec<Admitted>,
        over: Vec<Delivery>,
    },
    /// Nothing taken (stopping, a receive failure waited out, or the
    /// transport closed or failed, which stops the worker).
    Nothing,
}

/// Takes up to the permit's slots of deliveries and places them (in lanes
/// when some policy is ordered); a receive failure is waited out here, so
/// the consumer's running work goes on meanwhile.
pub(super) async fn take<H: Handler>(shared: &Shared<H>, mut permit: OwnedSemaphorePermit) -> Took {
    let intake = match &shared.intake {
        Some(m) => Some(m.lock().await),
        None => None,
    };
    if shared.is_stopping() {
        return Took::Nothing;
    }
    let max = permit.num_permits();
    let mut batch = Vec::with_capacity(max);
    match shared.ctx.transport.receive_many(&mut batch, max).await {
        Ok(0) => {
            shared.stop(Stop::Closed);
            Took::Nothing
        }
        Ok(_) => {
            shared.receive_failures.store(0, AtomicOrdering::Relaxed);
            shared
                .ctx
                .counters
                .received
                .fetch_add(batch.len() as u64, AtomicOrdering::Relaxed);
            let mut admitted = Vec::with_capacity(batch.len());
            let mut over = Vec::new();
            for d in batch {
                match permit.split(1) {
                    Some(slot) => admitted.extend(admit(shared, d, slot)),
                    None => over.push(d),
                }
            }
            drop(intake);
            if !over.is_empty() {
                tracing::warn!(
                    extra = over.len(),
                    asked = max,
                    "the transport gave more deliveries than asked; handing the extra back"
                );
            }
            Took::Batch { admitted, over }
        }
        Err(e) if e.is_retryable() => {
            drop(permit);
            drop(intake);
            let n = shared
                .receive_failures
                .fetch_add(1, AtomicOrdering::Relaxed)
                + 1;
            tracing::warn!(error = %e, failures = n, "receive failed; retrying");
            tokio::time::sleep(receive_pause(n)).await;
            Took::Nothing
        }
        Err(e) => {
            shared.stop(Stop::Failed(e));
            Took::Nothing
        }
    }
}

/// A delivery this consumer will process, owning its lane if it has one.
pub(super) struct Admitted {
    pub(super) delivery: Delivery,
    pub(super) permit: OwnedSemaphorePermit,
    pub(super) lane: Option<String>,
}

/// Places a delivery: returns it to process now, or queues it behind its
/// lane's owner and returns `None`. Called under the intake lock.
fn admit<H: Handler>(
    shared: &Shared<H>,
    d: Delivery,
    permit: OwnedSemaphorePermit,
) -> Option<Admitted> {
    if shared.ctx.router.route(&d.message.route).policy.ordering() != Ordering::Ordered {
        return Some(Admitted {
            delivery: d,
            permit,
            lane: None,
        });
    }
    let key = format!(
        "{}\u{1f}{}",
        d.message.route,
        d.lane.as_deref().unwrap_or("")
    );
    let mut lanes = shared.lanes();
    if let Some(queue) = lanes.get_mut(&key) {
        queue.push_back((d, permit));
        return None;
    }
    lanes.insert(key.clone(), VecDeque::new());
    Some(Admitted {
        delivery: d,
        permit,
        lane: Some(key),
    })
}

/// 100 ms after the first failure, doubling to 5 s.
fn receive_pause(failures: u32) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.clamp(1, 7).saturating_sub(1));
    Duration::from_millis(ms.min(5_000))
}
