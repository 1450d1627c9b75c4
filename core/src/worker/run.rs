//! The worker's main loop: take, dispatch (per lane in ordered mode), drain.

use std::{
    collections::{HashMap, VecDeque},
    future::Future,
    pin::Pin,
    sync::Arc,
    time::Duration,
};

use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    task::JoinSet,
};

use super::{
    Counters, Ctx, Handler, RunSummary, Worker, WorkerError,
    process::{Halt, process},
};
use crate::{
    policy::Ordering,
    transport::{Delivery, Settle, Transport, TransportError},
};

type Incoming = (
    OwnedSemaphorePermit,
    Result<Option<Delivery>, TransportError>,
);
type IncomingFuture = Pin<Box<dyn Future<Output = Option<Incoming>> + Send>>;

/// Why the loop is winding down.
enum Stop {
    Shutdown,
    Closed,
    Halted(Halt),
    Failed(TransportError),
}

struct TaskDone {
    lane: Option<String>,
    halt: Option<Halt>,
}

type Lanes = HashMap<String, VecDeque<(Delivery, OwnedSemaphorePermit)>>;

impl<H: Handler> Worker<H> {
    /// Runs until `shutdown` resolves, the transport closes, or a policy
    /// halts. In-flight messages always finish; queued, unstarted ones are
    /// released back to the broker.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<RunSummary, WorkerError> {
        let ctx = Arc::new(self.ctx);
        let permits = Arc::new(Semaphore::new(self.concurrency));
        let mut tasks: JoinSet<TaskDone> = JoinSet::new();
        let mut lanes: Lanes = HashMap::new();
        let mut incoming: Option<IncomingFuture> = None;
        let mut stop: Option<Stop> = None;
        let mut receive_failures = 0u32;
        tokio::pin!(shutdown);
        loop {
            if stop.is_none() && incoming.is_none() {
                let pause = receive_pause(receive_failures);
                incoming = Some(Box::pin(next(
                    permits.clone(),
                    ctx.transport.clone(),
                    pause,
                )));
            }
            if stop.is_some() && tasks.is_empty() {
                break;
            }
            tokio::select! {
                biased;
                () = &mut shutdown, if stop.is_none() => {
                    tracing::info!("shutdown requested: finishing in-flight messages");
                    stop = Some(Stop::Shutdown);
                    incoming = None;
                }
                Some(joined) = tasks.join_next() => {
                    let done = match joined {
                        Ok(done) => done,
                        Err(error) => {
                            // Handler panics are caught inside the task; this
                            // is a bug in the worker itself. Keep going.
                            tracing::error!(%error, "worker task ended abnormally");
                            continue;
                        }
                    };
                    if let Some(halt) = done.halt {
                        if !matches!(stop, Some(Stop::Halted(_))) {
                            stop = Some(Stop::Halted(halt));
                            incoming = None;
                        }
                    }
                    if let Some(key) = done.lane {
                        let next = lanes.get_mut(&key).and_then(VecDeque::pop_front);
                        match next {
                            Some((d, permit)) if stop.is_none() => spawn(&mut tasks, &ctx, d, permit, Some(key)),
                            Some(first) => {
                                release(&ctx, first.0).await;
                                for (d, _) in lanes.remove(&key).unwrap_or_default() {
                                    release(&ctx, d).await;
                                }
                            }
                            None => { lanes.remove(&key); }
                        }
                    }
                }
                got = poll(&mut incoming), if incoming.is_some() => {
                    incoming = None;
                    let Some((permit, result)) = got else { continue };
                    match result {
                        Ok(Some(d)) => {
                            receive_failures = 0;
                            Counters::bump(&ctx.counters.received);
                            dispatch(&mut tasks, &mut lanes, &ctx, d, permit);
                        }
                        Ok(None) => stop = Some(Stop::Closed),
                        Err(e) if e.is_retryable() => {
                            receive_failures = receive_failures.saturating_add(1);
                            tracing::warn!(error = %e, failures = receive_failures, "receive failed; retrying");
                        }
                        Err(e) => stop = Some(Stop::Failed(e)),
                    }
                }
                else => break,
            }
        }
        for (_, queue) in lanes.drain() {
            for (d, _) in queue {
                release(&ctx, d).await;
            }
        }
        let summary = ctx.counters.summary();
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

/// Waits for a free slot, then for a delivery: a slot is held by every
/// delivery the worker has taken, in flight or queued behind its lane.
async fn next(
    permits: Arc<Semaphore>,
    transport: Arc<dyn Transport>,
    pause: Duration,
) -> Option<Incoming> {
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
    let permit = permits.acquire_owned().await.ok()?;
    Some((permit, transport.receive().await))
}

async fn poll(f: &mut Option<IncomingFuture>) -> Option<Incoming> {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// 0 after a success, then 100 ms doubling to 5 s.
fn receive_pause(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let ms = 100u64.saturating_mul(1 << failures.min(6).saturating_sub(1));
    Duration::from_millis(ms.min(5_000))
}

fn dispatch<H: Handler>(
    tasks: &mut JoinSet<TaskDone>,
    lanes: &mut Lanes,
    ctx: &Arc<Ctx<H>>,
    d: Delivery,
    permit: OwnedSemaphorePermit,
) {
    let policy = &ctx.router.route(&d.message.route).policy;
    if policy.ordering() != Ordering::Ordered {
        spawn(tasks, ctx, d, permit, None);
        return;
    }
    let key = format!(
        "{}\u{1f}{}",
        d.message.route,
        d.lane.as_deref().unwrap_or("")
    );
    if let Some(queue) = lanes.get_mut(&key) {
        queue.push_back((d, permit));
    } else {
        lanes.insert(key.clone(), VecDeque::new());
        spawn(tasks, ctx, d, permit, Some(key));
    }
}

fn spawn<H: Handler>(
    tasks: &mut JoinSet<TaskDone>,
    ctx: &Arc<Ctx<H>>,
    d: Delivery,
    permit: OwnedSemaphorePermit,
    lane: Option<String>,
) {
    let ctx = ctx.clone();
    tasks.spawn(async move {
        let halt = process(&ctx, d).await;
        drop(permit);
        TaskDone { lane, halt }
    });
}

async fn release<H>(ctx: &Ctx<H>, d: Delivery) {
    match ctx.transport.settle(d, Settle::Release).await {
        Ok(()) => Counters::bump(&ctx.counters.released),
        Err(e) => {
            tracing::warn!(error = %e.error, "could not release an unstarted delivery; the broker will redeliver it")
        }
    }
}
