//! FIFO ordered mode: a failing head blocks only its own message group,
//! order within the group holds, and a parked message keeps its group and
//! deduplication id.

use std::time::Duration;

use parkway::{Backoff, Message, Ordering, RetryPolicy};

use crate::conformance::harness::{WITHIN, eventually, finish, start};

fn ordered() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::fixed(Duration::from_secs(2)))
        .ordering(Ordering::Ordered)
        .park_on(["PARK_ME"])
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_head_blocks_only_its_group() {
    let p = ordered();
    // Pauses as long as the lease: only the heartbeat keeps a2 (and a3, a4
    // queued behind it) from reappearing while the worker waits.
    let t = crate::transport(&p, |c| c.visibility_timeout = Duration::from_secs(2)).await;
    assert!(t.queue_url().ends_with(".fifo"));
    let q = crate::queue(&t);
    let a = [("a1", "ok"), ("a2", "fail:2"), ("a3", "ok"), ("a4", "ok")];
    for (id, body) in a {
        q.publish_msg(Message::new("fifo", body).with_id(id).with_key("A"))
            .await;
    }
    for i in 1..=6 {
        q.publish_msg(
            Message::new("fifo", "ok")
                .with_id(format!("b{i}"))
                .with_key("B"),
        )
        .await;
    }
    let w = start(&q, p);
    eventually(WITHIN * 2, "all ten handled", || async {
        w.record.successes().len() == 10
    })
    .await;
    let order = w.record.successes();
    let pos = |id: &str| order.iter().position(|x| x == id).unwrap();
    assert!(
        pos("a1") < pos("a2") && pos("a2") < pos("a3") && pos("a3") < pos("a4"),
        "group A in order: {order:?}"
    );
    for i in 1..6 {
        assert!(
            pos(&format!("b{i}")) < pos(&format!("b{}", i + 1)),
            "group B in order: {order:?}"
        );
    }
    // a2 waited two back-offs of 2 s; group B did not wait for it.
    assert!(
        pos("b6") < pos("a2"),
        "group B flowed while A was blocked: {order:?}"
    );
    let runs = w.record.runs("a2");
    assert_eq!(runs.len(), 3);
    for pair in runs.windows(2) {
        let waited = pair[1].at - pair[0].at;
        assert!(
            waited >= Duration::from_secs(2) && waited < Duration::from_millis(3500),
            "retried in place after the back-off: {waited:?}"
        );
    }
    assert_eq!(w.record.run_count("a3"), 1, "nothing behind a2 ran early");
    finish(w, &q).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_fifo_message_keeps_group_and_dedup_id() {
    let p = ordered();
    let t = crate::transport(&p, |_| {}).await;
    let q = crate::queue(&t);
    q.publish_msg(
        Message::new("fifo", "bad:PARK_ME")
            .with_id("c1")
            .with_key("C"),
    )
    .await;
    q.publish_msg(Message::new("fifo", "ok").with_id("c2").with_key("C"))
        .await;
    let w = start(&q, p);
    eventually(WITHIN, "c1 parked and c2 handled", || async {
        w.record.succeeded("c2") == 1 && q.parked().await.len() == 1
    })
    .await;
    let parked = q.parked().await.remove(0);
    assert_eq!(parked.message.key.as_deref(), Some("C"), "group kept");
    assert_eq!(
        parked.message.headers.get("sqs-deduplication-id"),
        Some("c1"),
        "the producer's deduplication id kept"
    );
    assert_eq!(parked.envelope.attempts, 1);
    finish(w, &q).await;
}
