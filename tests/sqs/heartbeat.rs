//! The visibility-timeout saturation trap: a handler slower than the
//! visibility timeout must not be processed twice, even with a competing
//! consumer waiting for the message to reappear.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use parkway::{Failure, Handler, Message, RetryPolicy, Worker};

use crate::conformance::harness::eventually;

/// Sleeps 7 s per message and counts runs by message id.
#[derive(Clone, Default)]
struct Slow {
    runs: Arc<Mutex<HashMap<String, usize>>>,
    done: Arc<Mutex<usize>>,
}

impl Handler for Slow {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        let id = msg.id.clone().unwrap_or_default();
        *self.runs.lock().unwrap().entry(id).or_default() += 1;
        tokio::time::sleep(Duration::from_secs(7)).await;
        *self.done.lock().unwrap() += 1;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_slower_than_the_visibility_timeout_runs_once() {
    let p = RetryPolicy::builder().max_attempts(3).build().unwrap();
    let a = crate::transport(&p, |c| c.visibility_timeout = Duration::from_secs(2)).await;
    // A second consumer of the same queue: it would take any message whose
    // lease ran out.
    let mut bc = crate::config_for(a.queue_url().rsplit('/').next().unwrap());
    bc.visibility_timeout = Duration::from_secs(2);
    let b = crate::connect(bc, &p).await;
    for i in 0..3 {
        a.publish(&Message::new("slow", "ok").with_id(format!("s{i}")))
            .await
            .unwrap();
    }
    let handler = Slow::default();
    let mut stops = Vec::new();
    let mut tasks = Vec::new();
    for t in [a.clone(), b.clone()] {
        let worker = Worker::builder(Arc::new(t), handler.clone())
            .policy(p.clone())
            .concurrency(4)
            .handler_timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        stops.push(tx);
        tasks.push(tokio::spawn(worker.run(async move {
            let _ = rx.await;
        })));
    }
    eventually(
        Duration::from_secs(40),
        "three slow messages done",
        || async { *handler.done.lock().unwrap() >= 3 },
    )
    .await;
    // Longer than two visibility timeouts: a lost lease would show now.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let runs = handler.runs.lock().unwrap().clone();
    for tx in stops {
        let _ = tx.send(());
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(runs.values().all(|n| *n == 1), "each ran once: {runs:?}");
    let parked = parkway::Transport::parking_lot(&a)
        .browse(10)
        .await
        .unwrap();
    assert!(parked.is_empty(), "nothing parked");
    b.close().await;
    a.delete_queues().await.unwrap();
}
