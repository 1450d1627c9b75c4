//! SQS's limits: a 1 MB error still parks (the envelope is bounded and
//! travels in one attribute), the body is kept byte for byte, and the
//! start-up check refuses delays the retry mode cannot hold.

use std::time::Duration;

use parkway::{Backoff, Failure, Handler, Message, RetryPolicy, Transport, Worker};
use parkway_sqs::{ENVELOPE_ATTRIBUTE, MAX_ATTRIBUTES, RetryMode};

use crate::conformance::harness::{WITHIN, eventually};

struct Loud;

impl Handler for Loud {
    async fn handle(&self, _: &Message) -> Result<(), Failure> {
        Err(Failure::new("PAYLOAD_REJECTED")
            .with_class(parkway::FailureClass::PermanentBusiness)
            .with_source("x".repeat(1024 * 1024)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_megabyte_error_still_parks() {
    let p = RetryPolicy::builder().max_attempts(3).build().unwrap();
    let t = crate::transport(&p, |_| {}).await;
    // 200 KiB of multi-byte text: the copy must stay under 256 KiB and equal.
    let body = "ü€".repeat(200 * 1024 / 5);
    let mut m = Message::new("limits", body.clone()).with_id("big");
    for i in 0..(MAX_ATTRIBUTES - 4) {
        m = m.with_header(format!("h{i}"), "v");
    }
    t.publish(&m).await.unwrap();
    let worker = Worker::builder(std::sync::Arc::new(t.clone()), Loud)
        .policy(p)
        .build()
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    let lot = t.parking_lot();
    eventually(WITHIN, "the message parked", || async {
        lot.browse(10).await.unwrap().len() == 1
    })
    .await;
    let parked = lot.browse(10).await.unwrap().remove(0);
    assert_eq!(parked.message.body, body.as_bytes(), "body byte for byte");
    assert_eq!(parked.message.headers.get("h0"), Some("v"));
    let e = parked.envelope;
    assert_eq!(e.attempts, 1);
    assert_eq!(e.reason.unwrap().as_str(), "PAYLOAD_REJECTED");
    let err = e.last_error.unwrap();
    assert!(
        err.len() <= 1024 && err.ends_with("xxxx"),
        "bounded: {} bytes",
        err.len()
    );
    let _ = tx.send(());
    run.await.unwrap().unwrap();
    assert_eq!(ENVELOPE_ATTRIBUTE, "parkway");
    t.delete_queues().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_up_check_refuses_delays_the_mode_cannot_hold() {
    let slow = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_secs(3600)))
        .build()
        .unwrap();
    let t = crate::transport(&slow, |c| c.retry_mode = RetryMode::Resend).await;
    let err = Worker::builder(std::sync::Arc::new(t.clone()), Loud)
        .policy(slow.clone())
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("1h") && err.contains("15m"), "{err}");
    t.delete_queues().await.unwrap();
    // Visibility mode holds an hour.
    let t = crate::transport(&slow, |_| {}).await;
    assert!(
        Worker::builder(std::sync::Arc::new(t.clone()), Loud)
            .policy(slow)
            .build()
            .is_ok()
    );
    assert!(t.capabilities().max_delay.unwrap() > Duration::from_secs(11 * 3600));
    t.delete_queues().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_emulator_is_an_error_not_a_skip() {
    let p = RetryPolicy::builder().build().unwrap();
    let mut c = crate::config(false);
    c.endpoint = Some("http://127.0.0.1:9".into());
    c.call_timeout = Duration::from_secs(3);
    c.wait_time = Duration::from_secs(1);
    let e = parkway_sqs::SqsTransport::connect(c, [&p])
        .await
        .unwrap_err();
    assert!(e.is_retryable(), "a connection failure: {e}");
}
