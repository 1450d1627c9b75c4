//! Tiny partition buffers: the pump waits for room on busy source
//! partitions and pauses retry-tier partitions, and neither loses, skips or
//! repeats a record.

use std::time::Duration;

use parkway::{Backoff, RetryPolicy};

use crate::conformance::{
    Queue,
    harness::{WITHIN, finish, start},
};

const N: usize = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_buffers_lose_and_repeat_nothing() {
    let p = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_millis(200)))
        .build()
        .unwrap();
    let t = crate::transport(&p, 3, |c| c.buffer_per_partition = 4).await;
    let q = Queue {
        transport: std::sync::Arc::new(t.clone()),
        publisher: std::sync::Arc::new(crate::Producer(t.clone())),
    };
    let mut sends = Vec::new();
    for i in 0..N {
        let t = t.clone();
        // Every fifth record fails once and comes back through a tier topic.
        let body = if i % 5 == 0 { "fail:1" } else { "ok" };
        sends.push(async move {
            t.publish(
                &parkway::Message::new("bp", body)
                    .with_id(format!("m{i}"))
                    .with_key(format!("k{}", i % 11)),
            )
            .await
        });
    }
    for r in futures_util::future::join_all(sends).await {
        r.unwrap();
    }
    let w = start(&q, p);
    let deadline = tokio::time::Instant::now() + WITHIN * 6;
    while w.record.successes().len() < N {
        if tokio::time::Instant::now() >= deadline {
            let missing: Vec<_> = (0..N)
                .filter(|i| w.record.succeeded(&format!("m{i}")) == 0)
                .map(|i| (i, w.record.run_count(&format!("m{i}"))))
                .collect();
            panic!(
                "{} of {N} succeeded; {} missing (id, runs), first: {:?}",
                w.record.successes().len(),
                missing.len(),
                &missing[..missing.len().min(20)]
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A moment for anything repeated to show up.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..N {
        let id = format!("m{i}");
        let want = if i % 5 == 0 { 2 } else { 1 };
        assert_eq!(
            w.record.run_count(&id),
            want,
            "{id} ran {} times",
            w.record.run_count(&id)
        );
        assert_eq!(w.record.succeeded(&id), 1, "{id}");
    }
    assert!(q.parked().await.is_empty(), "nothing parked");
    finish(w, &q).await;
}
