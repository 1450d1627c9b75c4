//! The worker's main loop.
//!
//! Why a few long-lived consumers and not a task per message? A spawn and
//! a cross-thread wake per message cost more than the whole in-memory
//! round-trip. Each consumer takes as many deliveries as there are free
//! slots in one receive (one lock and one wake-up of the transport for the
//! lot), runs them concurrently, and goes on taking while they run: each
//! frees its slot as it settles, so a slow one holds up nothing but itself,
//! and a free slot is used by a consumer already awake (a task waiting per
//! slot cost a wake-up, and a receive of one, per message). There is a
//! consumer per batch of slots and at least one per core. Ordered policies
//! add lanes: the consumer that takes the first delivery of a lane owns it
//! and drains its queue in order; others only queue behind it. A slot
//! (semaphore permit) is held by every delivery the worker has taken, in
//! flight or queued, so the worker never holds more than `concurrency`.

use std::{
    collections::{HashMap, VecDeque},
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, atomic::AtomicU32},
    task::Poll,
};

use futures_util::{StreamExt as _, stream::FuturesUnordered};
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore, watch},
    task::JoinSet,
};

use super::{
    Counters, Ctx, Handler, RunSummary, Worker, WorkerError,
    intake::{self, Admitted, Took, free_slots, take, with_more},
    process::{Halt, process},
};
use crate::{
    policy::Ordering,
    transport::{Delivery, Settle, TransportError},
};

/// Why the worker is winding down.
pub(super) enum Stop {
    Shutdown,
    Closed,
    Halted(Halt),
    Failed(TransportError),
}

type Lanes = HashMap<String, VecDeque<(Delivery, OwnedSemaphorePermit)>>;

pub(super) struct Shared<H> {
    pub(super) ctx: Ctx<H>,
    permits: Arc<Semaphore>,
    /// A key is present while its lane has an owner.
    lanes: Mutex<Lanes>,
    /// Taking a delivery and placing it in its lane is one step, so lanes
    /// see deliveries in the order the transport gave them. Only needed
    /// when some policy is ordered.
    pub(super) intake: Option<tokio::sync::Mutex<()>>,
    stop: Mutex<Option<Stop>>,
    stopping: watch::Sender<bool>,
    pub(super) receive_failures: AtomicU32,
}

impl<H> Shared<H> {
    pub(super) fn lanes(&self) -> MutexGuard<'_, Lanes> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records why the worker stops; an error outranks a plain stop.
    pub(super) fn stop(&self, why: Stop) {
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

    pub(super) fn is_stopping(&self) -> bool {
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
        for _ in 0..consumer_count(self.concurrency) {
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

/// How many consumers a worker of `concurrency` runs: one per batch of
/// slots, and at least one per core (a consumer's deliveries run on one
/// thread at a time), never more than there are slots.
fn consumer_count(concurrency: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    concurrency
        .div_ceil(intake::MAX_BATCH)
        .max(cores)
        .min(concurrency)
}

/// What a consumer waits for next.
enum Event {
    /// A batch it runs finished.
    Finished,
    /// Its take came back.
    Took(Took),
    /// A slot is free (it was idle, with none).
    Slot(OwnedSemaphorePermit),
    /// The worker is stopping.
    Stop,
}

/// One consumer: takes as many deliveries as there are free slots and
/// keeps running them while it takes more, so a slow delivery holds only
/// its own slot and a free slot is used at once, without a task of its own
/// waiting for it (a waiting task per slot meant a wake-up per message).
/// On stop it takes nothing more and finishes what it runs.
async fn consume<H: Handler>(shared: Arc<Shared<H>>) {
    let shared = &*shared;
    let mut stopping = shared.stopping.subscribe();
    let stop = stopping.wait_for(|s| *s);
    tokio::pin!(stop);
    let mut stopped = false;
    let mut running = FuturesUnordered::new();
    let mut taking: Option<Pin<Box<dyn Future<Output = Took> + Send + '_>>> = None;
    let mut waiting: Option<Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send>>> =
        None;
    loop {
        stopped = stopped || shared.is_stopping();
        if stopped {
            // No take begins after a stop, and one under way is cut short:
            // a transport adds deliveries only as its receive returns, so
            // it holds none.
            taking = None;
            waiting = None;
            if running.is_empty() {
                return;
            }
        } else if taking.is_none() {
            if let Some(permit) = free_slots(&shared.permits) {
                waiting = None;
                taking = Some(Box::pin(take(shared, permit)));
            } else if waiting.is_none() {
                let permits = shared.permits.clone();
                waiting = Some(Box::pin(async move { permits.acquire_owned().await.ok() }));
            }
        }
        let event = std::future::poll_fn(|cx| {
            // What is ready first; the stop signal, which every consumer
            // shares, only registered when nothing else is.
            if let Poll::Ready(Some(())) = running.poll_next_unpin(cx) {
                return Poll::Ready(Event::Finished);
            }
            if let Some(t) = taking.as_mut()
                && let Poll::Ready(took) = t.as_mut().poll(cx)
            {
                return Poll::Ready(Event::Took(took));
            }
            if let Some(w) = waiting.as_mut()
                && let Poll::Ready(permit) = w.as_mut().poll(cx)
            {
                return Poll::Ready(match permit {
                    Some(p) => Event::Slot(p),
                    // The semaphore is never closed; stop if it were.
                    None => Event::Stop,
                });
            }
            if !stopped && stop.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Event::Stop);
            }
            Poll::Pending
        });
        match event.await {
            Event::Finished => {}
            Event::Slot(permit) => {
                waiting = None;
                let permit = with_more(&shared.permits, permit);
                taking = Some(Box::pin(take(shared, permit)));
            }
            Event::Took(took) => {
                taking = None;
                if let Some(batch) = run_took(took, shared) {
                    running.push(batch);
                }
            }
            Event::Stop => stopped = true,
        }
    }
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
/// one's, not one per branch. A plain function around an `async move`
/// block that works on `work` where it was captured: an `async fn`, or
/// taking `work` apart, would keep the delivery in the future two or three
/// times over, and this future is moved per message.
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn would hold its arguments twice"
)]
fn run_admitted<H: Handler>(
    shared: &Shared<H>,
    mut work: Admitted,
) -> impl Future<Output = ()> + Send + '_ {
    async move {
        let ctx = &shared.ctx;
        loop {
            if work.lane.is_some() && shared.is_stopping() {
                let rest = work
                    .lane
                    .as_ref()
                    .and_then(|key| shared.lanes().remove(key))
                    .unwrap_or_default();
                let released = Box::pin(release_all(
                    ctx,
                    std::iter::once(work.delivery).chain(rest.into_iter().map(|(d, _)| d)),
                ));
                released.await;
                return;
            }
            if let Some(h) = process(ctx, work.delivery).await {
                shared.stop(Stop::Halted(h));
            }
            drop(work.permit);
            let Some(key) = &work.lane else { return };
            let next = {
                let mut lanes = shared.lanes();
                let next = lanes.get_mut(key).and_then(VecDeque::pop_front);
                if next.is_none() {
                    lanes.remove(key);
                }
                next
            };
            let Some((delivery, permit)) = next else {
                return;
            };
            work.delivery = delivery;
            work.permit = permit;
        }
    }
}

/// The future of what a take brought, to run beside the consumer's other
/// work.
fn run_took<H: Handler>(
    took: Took,
    shared: &Shared<H>,
) -> Option<impl Future<Output = ()> + Send + '_> {
    let Took::Batch { admitted, over } = took else {
        return None;
    };
    Some(async move {
        if !over.is_empty() {
            // Boxed: a misbehaving transport's path, kept out of the
            // size of every batch's future.
            let extra = Box::pin(release_all(&shared.ctx, over.into_iter()));
            extra.await;
        }
        run_batch(shared, admitted).await;
    })
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
