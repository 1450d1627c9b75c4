//! The worker's main loop.
//!
//! Why long-lived consumers and not a task per message? A spawn and a
//! cross-thread wake per message cost more than the whole in-memory
//! round-trip; `concurrency` consumers that each take, process and settle
//! in turn keep the engine close to the transport's own speed. A consumer
//! with several free slots takes that many deliveries in one receive (one
//! lock and one wake-up of the transport for the lot) and runs them
//! concurrently; each frees its slot as it settles, so a slow one holds up
//! nothing but itself (`concurrency` consumers are enough to use every free
//! slot). Ordered policies add lanes: the consumer that takes the first delivery of a lane
//! owns it and drains its queue in order; others only queue behind it. A
//! slot (semaphore permit) is held by every delivery the worker has taken,
//! in flight or queued, so the worker never holds more than `concurrency`.

use std::{
    collections::{HashMap, VecDeque},
    future::Future,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU32, Ordering as AtomicOrdering},
    },
    task::Poll,
    time::Duration,
};

use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore, watch},
    task::JoinSet,
};

use super::{
    Counters, Ctx, Handler, RunSummary, Worker, WorkerError,
    process::{Halt, process},
};
use crate::{
    policy::Ordering,
    transport::{Delivery, Settle, TransportError},
};

/// Why the worker is winding down.
enum Stop {
    Shutdown,
    Closed,
    Halted(Halt),
    Failed(TransportError),
}

type Lanes = HashMap<String, VecDeque<(Delivery, OwnedSemaphorePermit)>>;

struct Shared<H> {
    ctx: Ctx<H>,
    permits: Arc<Semaphore>,
    /// A key is present while its lane has an owner.
    lanes: Mutex<Lanes>,
    /// Taking a delivery and placing it in its lane is one step, so lanes
    /// see deliveries in the order the transport gave them. Only needed
    /// when some policy is ordered.
    intake: Option<tokio::sync::Mutex<()>>,
    stop: Mutex<Option<Stop>>,
    stopping: watch::Sender<bool>,
    receive_failures: AtomicU32,
}

impl<H> Shared<H> {
    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records why the worker stops; an error outranks a plain stop.
    fn stop(&self, why: Stop) {
        let mut stop = self.stop.lock().unwrap_or_else(|p| p.into_inner());
        let replace = matches!(
            (&*stop, &why),
            (None, _)
                | (
                    Some(Stop::Shutdown | Stop::Closed),
                    Stop::Halted(_) | Stop::Failed(_)
                )
        );
        if replace {
            *stop = Some(why);
        }
        self.stopping.send_replace(true);
    }

    fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }
}

impl<H: Handler> Worker<H> {
    /// Runs until `shutdown` resolves, the transport closes, or a policy
    /// halts. In-flight messages always finish; queued, unstarted ones are
    /// released back to the broker.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<RunSummary, WorkerError> {
        let ordered = self
            .ctx
            .router
            .policies()
            .any(|p| p.policy.ordering() == Ordering::Ordered);
        let shared = Arc::new(Shared {
            ctx: self.ctx,
            permits: Arc::new(Semaphore::new(self.concurrency)),
            lanes: Mutex::new(HashMap::new()),
            intake: ordered.then(|| tokio::sync::Mutex::new(())),
            stop: Mutex::new(None),
            stopping: watch::channel(false).0,
            receive_failures: AtomicU32::new(0),
        });
        let mut consumers = JoinSet::new();
        for _ in 0..self.concurrency {
            consumers.spawn(consume(shared.clone()));
        }
        let mut stopped = shared.stopping.subscribe();
        tokio::select! {
            () = shutdown => {
                tracing::info!("shutdown requested: finishing in-flight messages");
                shared.stop(Stop::Shutdown);
            }
            _ = stopped.wait_for(|s| *s) => {}
        }
        while let Some(joined) = consumers.join_next().await {
            if let Err(error) = joined {
                // Handler panics are caught inside `process`; this would be a
                // bug in the worker itself.
                tracing::error!(%error, "worker consumer ended abnormally");
            }
        }
        let leftovers: Vec<_> = shared.lanes().drain().flat_map(|(_, q)| q).collect();
        for (d, _) in leftovers {
            release(&shared.ctx, d).await;
        }
        shared.ctx.transport.stop_receiving().await;
        let summary = shared.ctx.counters.summary();
        let stop = shared.stop.lock().unwrap_or_else(|p| p.into_inner()).take();
        match stop {
            Some(Stop::Halted(h)) => Err(WorkerError::Halted {
                policy: h.policy,
                route: h.route,
                message_id: h.message_id,
                reason: h.reason,
            }),
            Some(Stop::Failed(e)) => Err(WorkerError::Transport(e)),
            Some(Stop::Shutdown | Stop::Closed) | None => Ok(summary),
        }
    }
}

/// Deliveries one consumer takes at once, at most: one lock and one
/// wake-up of the transport for several messages, while batches stay small
/// enough that the slots spread over the consumers.
const MAX_BATCH: usize = 16;

/// One consumer: take free slots, take as many deliveries, process them
/// (concurrently, or queued behind their lanes), repeat until the worker
/// stops.
async fn consume<H: Handler>(shared: Arc<Shared<H>>) {
    let mut stopping = shared.stopping.subscribe();
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        if shared.is_stopping() {
            return;
        }
        let mut permit =
            match unless_stopping(&mut stopping, shared.permits.clone().acquire_owned()).await {
                Some(Ok(p)) => p,
                Some(Err(_)) | None => return,
            };
        // More free slots, without waiting for any.
        let more = shared.permits.available_permits().min(MAX_BATCH - 1);
        if let Some(p) = u32::try_from(more)
            .ok()
            .filter(|n| *n > 0)
            .and_then(|n| shared.permits.clone().try_acquire_many_owned(n).ok())
        {
            permit.merge(p);
        }
        let intake = match &shared.intake {
            Some(m) => match unless_stopping(&mut stopping, m.lock()).await {
                Some(g) => Some(g),
                None => return,
            },
            None => None,
        };
        if shared.is_stopping() {
            return;
        }
        let max = permit.num_permits();
        let received = unless_stopping(
            &mut stopping,
            shared.ctx.transport.receive_many(&mut batch, max),
        )
        .await;
        let Some(received) = received else {
            // Stopped while waiting: a transport adds deliveries only as it
            // returns, but hand back anything that is there all the same.
            let left = Box::pin(release_all(&shared.ctx, batch.drain(..)));
            left.await;
            return;
        };
        match received {
            Ok(0) => {
                shared.stop(Stop::Closed);
                return;
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
                for d in batch.drain(..) {
                    match permit.split(1) {
                        Some(slot) => admitted.extend(admit(&shared, d, slot)),
                        None => over.push(d),
                    }
                }
                drop(permit);
                drop(intake);
                if !over.is_empty() {
                    tracing::warn!(
                        extra = over.len(),
                        asked = max,
                        "the transport gave more deliveries than asked; handing the extra back"
                    );
                    let extra = Box::pin(release_all(&shared.ctx, over.into_iter()));
                    extra.await;
                }
                run_batch(&shared, admitted).await;
            }
            Err(e) if e.is_retryable() => {
                drop(permit);
                let n = shared
                    .receive_failures
                    .fetch_add(1, AtomicOrdering::Relaxed)
                    + 1;
                tracing::warn!(error = %e, failures = n, "receive failed; retrying");
                tokio::select! {
                    biased;
                    _ = stopping.wait_for(|s| *s) => return,
                    () = tokio::time::sleep(receive_pause(n)) => {}
                }
            }
            Err(e) => {
                shared.stop(Stop::Failed(e));
                return;
            }
        }
    }
}

/// A delivery this consumer will process, owning its lane if it has one.
struct Admitted {
    delivery: Delivery,
    permit: OwnedSemaphorePermit,
    lane: Option<String>,
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

/// Runs a batch's admitted deliveries concurrently: a slow handler holds
/// up only its own slot, which the others do not wait for.
async fn run_batch<H: Handler>(shared: &Shared<H>, mut admitted: Vec<Admitted>) {
    if admitted.len() <= 1 {
        if let Some(work) = admitted.pop() {
            run_admitted(shared, work).await;
        }
        return;
    }
    let all = futures_util::future::join_all(admitted.into_iter().map(|w| run_admitted(shared, w)));
    all.await;
}

/// Processes an admitted delivery; a lane owner then drains its lane.
///
/// One loop for both, so the (large) message future has one place in this
/// one's, not one per branch.
async fn run_admitted<H: Handler>(shared: &Shared<H>, work: Admitted) {
    let ctx = &shared.ctx;
    let Admitted {
        delivery,
        permit,
        lane,
    } = work;
    let mut current = Some((delivery, permit));
    while let Some((d, permit)) = current.take() {
        if lane.is_some() && shared.is_stopping() {
            let rest = lane
                .as_ref()
                .and_then(|key| shared.lanes().remove(key))
                .unwrap_or_default();
            let released = Box::pin(release_all(
                ctx,
                std::iter::once(d).chain(rest.into_iter().map(|(d, _)| d)),
            ));
            released.await;
            return;
        }
        if let Some(h) = process(ctx, d).await {
            shared.stop(Stop::Halted(h));
        }
        drop(permit);
        let Some(key) = &lane else { return };
        let mut lanes = shared.lanes();
        current = lanes.get_mut(key).and_then(VecDeque::pop_front);
        if current.is_none() {
            lanes.remove(key);
        }
    }
}

/// Runs `work` until it completes, or returns `None` once the worker stops
/// first. Work that is ready at once (a free slot, a buffered delivery: the
/// common case under load) completes without registering for the stop
/// signal, which every consumer shares.
async fn unless_stopping<F: Future>(
    stopping: &mut watch::Receiver<bool>,
    work: F,
) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    if let Poll::Ready(v) = std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await {
        return Some(v);
    }
    tokio::select! {
        biased;
        _ = stopping.wait_for(|s| *s) => None,
        v = work => Some(v),
    }
}

/// 100 ms after the first failure, doubling to 5 s.
fn receive_pause(failures: u32) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.clamp(1, 7).saturating_sub(1));
    Duration::from_millis(ms.min(5_000))
}

async fn release_all<H>(ctx: &Ctx<H>, deliveries: impl Iterator<Item = Delivery>) {
    for d in deliveries {
        release(ctx, d).await;
    }
}

async fn release<H>(ctx: &Ctx<H>, d: Delivery) {
    match ctx.transport.settle(d, Settle::Release).await {
        Ok(()) => Counters::bump(&ctx.counters.released),
        Err(e) => {
            tracing::warn!(error = %e.error, "could not release an unstarted delivery; the broker will redeliver it")
        }
    }
}
