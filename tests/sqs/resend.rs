//! Resend mode: a retry is a copy with the updated envelope and
//! `DelaySeconds`, the original deleted after the copy is accepted.

use std::time::Duration;

use parkway::{Backoff, RetryPolicy};
use parkway_sqs::RetryMode;

use crate::conformance::harness::{WITHIN, eventually, finish, settle_down, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resend_mode_retries_by_copy_with_delay_seconds() {
    let p = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_secs(2)))
        .build()
        .unwrap();
    let t = crate::transport(&p, |c| c.retry_mode = RetryMode::Resend).await;
    let q = crate::queue(&t);
    q.publish("twice", "fail:2").await;
    q.publish("never", "forever").await;
    let w = start(&q, p);
    eventually(WITHIN, "twice succeeds and never parks", || async {
        w.record.succeeded("twice") == 1 && q.parked().await.len() == 1
    })
    .await;
    settle_down().await;
    let runs = w.record.runs("twice");
    assert_eq!(runs.len(), 3, "two failures, one success, no duplicate");
    for pair in runs.windows(2) {
        let waited = pair[1].at - pair[0].at;
        assert!(
            waited + Duration::from_millis(2) >= Duration::from_secs(2)
                && waited <= Duration::from_millis(2600),
            "waited {waited:?}"
        );
    }
    let e = q.parked().await.remove(0).envelope;
    assert_eq!(e.attempts, 3, "the copies carried the count");
    assert!(
        e.total_delay >= Duration::from_secs(4),
        "{:?}",
        e.total_delay
    );
    assert_eq!(w.record.run_count("never"), 3);
    finish(w, &q).await;
}
