//! A poison flood across three partitions does not starve healthy records.

use std::time::Duration;

use parkway::{Backoff, RetryPolicy};

use crate::conformance::{
    Queue,
    harness::{WITHIN, eventually, finish, start},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_poison_records_do_not_starve_a_thousand_healthy_ones() {
    let p = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_millis(200)))
        .park_on(["POISON"])
        .build()
        .unwrap();
    let t = crate::transport(&p, 3, |_| {}).await;
    let q = Queue {
        transport: std::sync::Arc::new(t.clone()),
        publisher: std::sync::Arc::new(crate::Producer(t.clone())),
    };
    let mut sends = Vec::new();
    for i in 0..1000 {
        let t = t.clone();
        sends.push(async move {
            let key = format!("k{}", i % 7);
            t.publish(
                &parkway::Message::new("flood", "bad:POISON")
                    .with_id(format!("poison-{i}"))
                    .with_key(key.clone()),
            )
            .await?;
            t.publish(
                &parkway::Message::new("flood", "ok")
                    .with_id(format!("healthy-{i}"))
                    .with_key(key),
            )
            .await
        });
    }
    for r in futures_util::future::join_all(sends).await {
        r.unwrap();
    }
    let w = start(&q, p);
    eventually(WITHIN * 6, "every healthy record processed", || async {
        (0..1000).all(|i| w.record.succeeded(&format!("healthy-{i}")) >= 1)
    })
    .await;
    eventually(WITHIN * 3, "every poison record parked", || async {
        q.parked().await.len() >= 1000
    })
    .await;
    finish(w, &q).await;
}
