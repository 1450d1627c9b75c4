//! A poison flood does not starve healthy messages.

use std::time::Duration;

use parkway::{Backoff, RetryPolicy};

use crate::conformance::harness::{WITHIN, eventually, finish, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_poison_messages_do_not_starve_a_thousand_healthy_ones() {
    let p = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_millis(200)))
        .park_on(["POISON"])
        .build()
        .unwrap();
    let q = crate::queue(&p, |c| c.prefetch = 64).await;
    for i in 0..1000 {
        q.publish(&format!("poison-{i}"), "bad:POISON").await;
        q.publish(&format!("healthy-{i}"), "ok").await;
    }
    let w = start(&q, p);
    eventually(WITHIN * 6, "every healthy message processed", || async {
        (0..1000).all(|i| w.record.succeeded(&format!("healthy-{i}")) >= 1)
    })
    .await;
    eventually(WITHIN * 3, "every poison message parked", || async {
        q.parked().await.len() == 1000
    })
    .await;
    for i in (0..1000).step_by(97) {
        assert_eq!(
            w.record.run_count(&format!("poison-{i}")),
            1,
            "poison parked at once, never retried"
        );
    }
    finish(w, &q).await;
}
