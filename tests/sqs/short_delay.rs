//! Short retry delays (under two seconds) are held by the process that
//! made them: a competing consumer never runs the message early.

use std::{sync::Arc, time::Duration};

use parkway::{Backoff, RetryPolicy, Worker};

use crate::conformance::{
    harness::{WITHIN, eventually},
    script::Scripted,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_competing_consumer_never_runs_a_short_retry_early() {
    let p = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::fixed(Duration::from_millis(1500)))
        .build()
        .unwrap();
    let a = crate::transport(&p, |_| {}).await;
    let name = a.queue_url().rsplit('/').next().unwrap().to_owned();
    let b = crate::connect(crate::config_for(&name), &p).await;
    for i in 0..6 {
        a.publish(&parkway::Message::new("short", "fail:2").with_id(format!("s{i}")))
            .await
            .unwrap();
    }
    // Both consumers share one record.
    let handler = Scripted::default();
    let record = handler.record.clone();
    let mut stops = Vec::new();
    let mut tasks = Vec::new();
    for t in [a.clone(), b.clone()] {
        let worker = Worker::builder(Arc::new(t), handler.clone())
            .policy(p.clone())
            .concurrency(4)
            .build()
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        stops.push(tx);
        tasks.push(tokio::spawn(worker.run(async move {
            let _ = rx.await;
        })));
    }
    eventually(WITHIN, "all six succeed", || async {
        record.successes().len() == 6
    })
    .await;
    for i in 0..6 {
        let runs = record.runs(&format!("s{i}"));
        assert_eq!(runs.len(), 3, "s{i}: two failures, one success");
        for pair in runs.windows(2) {
            let waited = pair[1].at - pair[0].at;
            assert!(
                waited + Duration::from_millis(2) >= Duration::from_millis(1500)
                    && waited < Duration::from_millis(1900),
                "s{i} waited {waited:?}"
            );
        }
    }
    for tx in stops {
        let _ = tx.send(());
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    b.close().await;
    a.delete_queues().await.unwrap();
}
