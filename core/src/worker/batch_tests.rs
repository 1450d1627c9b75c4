//! Batched receiving keeps the worker's concurrency: deliveries taken
//! together run together, and a slow one holds only its own slot.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering as AtomicOrdering},
    },
    time::Duration,
};

use tokio::sync::Semaphore;

use super::*;
use crate::{Failure, Message, memory::MemoryTransport};

/// `hold` waits for the gate; anything else succeeds at once. Counts what
/// runs at the same time.
#[derive(Clone)]
struct Gated {
    gate: Arc<Semaphore>,
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    done: Arc<AtomicUsize>,
}

impl Handler for Gated {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        let now = self.running.fetch_add(1, AtomicOrdering::SeqCst) + 1;
        self.most.fetch_max(now, AtomicOrdering::SeqCst);
        if *msg.body == *b"hold" {
            let _ = self.gate.acquire().await;
        } else {
            tokio::task::yield_now().await;
        }
        self.running.fetch_sub(1, AtomicOrdering::SeqCst);
        self.done.fetch_add(1, AtomicOrdering::SeqCst);
        Ok(())
    }
}

/// A worker of `concurrency` slots on `t` whose handler is a fresh [`Gated`].
fn gated(t: &MemoryTransport, concurrency: usize) -> (Gated, Worker<Gated>) {
    let h = Gated {
        gate: Arc::new(Semaphore::new(0)),
        running: Arc::default(),
        most: Arc::default(),
        done: Arc::default(),
    };
    let worker = Worker::builder(Arc::new(t.clone()), h.clone())
        .concurrency(concurrency)
        .handler_timeout(Duration::from_secs(3600))
        .build()
        .unwrap();
    (h, worker)
}

/// Whether `counter` reaches `n` within a minute (of paused time).
async fn reaches(counter: &AtomicUsize, n: usize) -> bool {
    let reached = tokio::time::timeout(Duration::from_secs(60), async {
        while counter.load(AtomicOrdering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    reached.await.is_ok()
}

#[tokio::test(start_paused = true)]
async fn a_batch_runs_together_and_a_slow_delivery_holds_only_its_slot() {
    let t = MemoryTransport::new("orders");
    // The first batch a consumer takes holds three slow ones and a quick one.
    for i in 0..3 {
        t.publish(Message::new("orders", "hold").with_id(format!("h{i}")));
    }
    for i in 0..20 {
        t.publish(Message::new("orders", "ok").with_id(format!("q{i}")));
    }
    let (h, worker) = gated(&t, 4);
    let idle = t.clone();
    let run = tokio::spawn(worker.run(async move { idle.idle().await }));
    // All quick ones finish while the slow ones still hold their slots: the
    // batch did not run one after another, and the one free slot kept
    // turning over.
    assert!(
        reaches(&h.done, 20).await,
        "quick deliveries waited behind slow ones"
    );
    assert_eq!(
        h.running.load(AtomicOrdering::SeqCst),
        3,
        "the slow ones are still running"
    );
    h.gate.add_permits(3);
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.acked, 23);
    assert_eq!(summary.received, 23);
    assert_eq!(
        h.most.load(AtomicOrdering::SeqCst),
        4,
        "never more than the concurrency, and all of it used"
    );
}

/// A wide worker costs a few tasks, not one per slot: free slots are taken
/// by consumers already awake (a task waiting per slot meant a wake-up per
/// message, and a thousand tasks for `concurrency = 1000`).
#[tokio::test(start_paused = true)]
async fn a_thousand_slots_run_on_a_few_tasks_and_all_are_used() {
    let t = MemoryTransport::new("orders");
    for i in 0..1500 {
        t.publish(Message::new("orders", "hold").with_id(format!("h{i}")));
    }
    let (h, worker) = gated(&t, 1000);
    let before = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    let idle = t.clone();
    let run = tokio::spawn(worker.run(async move { idle.idle().await }));
    assert!(reaches(&h.running, 1000).await, "not every slot was used");
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
        - before;
    assert!(
        tasks <= 1 + 1000 / 16 + 8,
        "{tasks} tasks for a worker of 1000 slots"
    );
    h.gate.add_permits(1500);
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.acked, 1500);
    assert_eq!(
        h.most.load(AtomicOrdering::SeqCst),
        1000,
        "never more than the concurrency"
    );
}
