//! Ordered mode: strict order per lane despite a failure in the middle.

use std::time::Duration;

use parkway::{Backoff, Message, Ordering, RetryPolicy};

use super::{
    Outcome,
    harness::{Broker, WITHIN, eventually, finish, start},
};

pub async fn ordered_mode_keeps_order_per_lane(b: &dyn Broker) -> Outcome {
    let p = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::fixed(Duration::from_millis(300)))
        .ordering(Ordering::Ordered)
        .build()
        .unwrap();
    let q = b.queue(&p).await;
    if !q.transport.capabilities().ordered {
        q.publisher.teardown().await;
        return Outcome::Unsupported("the transport states it has no ordered mode");
    }
    let msgs = [
        ("a1", "ok", "A"),
        ("a2", "fail:2", "A"),
        ("a3", "ok", "A"),
        ("a4", "ok", "A"),
        ("b1", "ok", "B"),
        ("b2", "ok", "B"),
    ];
    for (id, body, key) in msgs {
        q.publish_msg(Message::new("conformance", body).with_id(id).with_key(key))
            .await;
    }
    let w = start(&q, p);
    eventually(WITHIN, "all six handled", || async {
        w.record.successes().len() == 6
    })
    .await;
    let order = w.record.successes();
    let pos = |id: &str| order.iter().position(|x| x == id).unwrap();
    assert!(
        pos("a1") < pos("a2") && pos("a2") < pos("a3") && pos("a3") < pos("a4"),
        "lane A out of order: {order:?}"
    );
    assert!(pos("b1") < pos("b2"), "lane B out of order: {order:?}");
    assert_eq!(w.record.run_count("a2"), 3);
    assert_eq!(w.record.run_count("a3"), 1, "nothing behind a2 ran early");
    finish(w, &q).await;
    Outcome::Passed
}
