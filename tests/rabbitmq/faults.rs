//! Nothing is lost when the broker or the connection misbehaves.

use std::time::Duration;

use lapin::{
    BasicProperties, Connection, ConnectionProperties,
    options::{BasicPublishOptions, QueueDeleteOptions},
    types::{AMQPValue, FieldArray, FieldTable, LongString},
};
use parkway::{Backoff, RetryPolicy};

use crate::conformance::harness::{WITHIN, eventually, finish, settle_down, start};

fn policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::fixed(Duration::from_millis(300)))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_killed_between_confirm_and_ack_loses_nothing() {
    let p = policy();
    let q = crate::queue(&p, |_| {}).await;
    q.publish("m", "fail:1").await;
    crate::faults(&q).close_after_confirm(1);
    let w = start(&q, p);
    // Run 1 fails; its retry copy is confirmed; the connection dies before
    // the ack. The broker requeues the original (run 2) and the copy comes
    // back after its delay (run 3): a duplicate, never a loss.
    eventually(
        WITHIN,
        "the original and the copy both processed",
        || async { w.record.succeeded("m") == 2 },
    )
    .await;
    settle_down().await;
    assert_eq!(w.record.run_count("m"), 3);
    assert!(q.parked().await.is_empty());
    let s = finish(w, &q).await;
    assert!(s.unsettled >= 1, "the failed ack is counted: {s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unroutable_copy_is_caught_by_the_mandatory_return() {
    let p = policy();
    let q = crate::queue(&p, |_| {}).await;
    // First retry declares the 300 ms wait queue.
    q.publish("a", "fail:1").await;
    let w = start(&q, p);
    eventually(WITHIN, "a succeeds", || async {
        w.record.succeeded("a") == 1
    })
    .await;
    // Someone deletes the wait queue behind the worker's back.
    let names = crate::names(&q);
    let conn = Connection::connect(&crate::url(), ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    ch.queue_delete(
        names.wait(Duration::from_millis(300)).as_str().into(),
        QueueDeleteOptions::default(),
    )
    .await
    .unwrap();
    q.publish("b", "fail:2").await;
    // The copy comes back as 312 NO_ROUTE: the original is not acked, it is
    // delivered again, the wait queue is declared again, and b completes.
    eventually(WITHIN, "b succeeds", || async {
        w.record.succeeded("b") == 1
    })
    .await;
    assert!(w.record.run_count("b") >= 3);
    let s = finish(w, &q).await;
    assert!(s.unsettled >= 1, "the refused retry is counted: {s:?}");
    let _ = conn.close(200, "done".into()).await;
}

fn long(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_broker_headers_never_crash_or_escape_the_policy() {
    let p = policy();
    let q = crate::queue(&p, |_| {}).await;
    let names = crate::names(&q);
    let conn = Connection::connect(&crate::url(), ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let publish = |id: &'static str, headers: FieldTable| {
        let ch = ch.clone();
        let (ex, rk) = (names.exchange.clone(), names.routing_key.clone());
        async move {
            let props = BasicProperties::default()
                .with_message_id(id.into())
                .with_headers(headers);
            ch.basic_publish(
                ex.as_str().into(),
                rk.as_str().into(),
                BasicPublishOptions::default(),
                b"forever",
                props,
            )
            .await
            .unwrap()
            .await
            .unwrap();
        }
    };
    // x-death that is not an array.
    let mut t = FieldTable::default();
    t.insert("x-death".into(), long("garbage"));
    t.insert("x-delivery-count".into(), long("-7"));
    publish("not-an-array", t).await;
    // A forged x-death claiming a billion expirations from our wait queue:
    // it can only make the message *older*, so it parks at once.
    let mut death = FieldTable::default();
    death.insert(
        "queue".into(),
        long(&names.wait(Duration::from_millis(300))),
    );
    death.insert("reason".into(), long("expired"));
    death.insert("count".into(), AMQPValue::LongLongInt(1_000_000_000));
    let mut t = FieldTable::default();
    t.insert(
        "x-death".into(),
        AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death)])),
    );
    publish("forged-death", t).await;
    // Absurd attempt numbers and a header as large as a frame allows.
    let mut t = FieldTable::default();
    t.insert("x-parkway-attempt".into(), long("99999999999999"));
    t.insert("x-parkway-first-failure-at".into(), long("not a time"));
    t.insert(
        "big".into(),
        AMQPValue::LongString(LongString::from(vec![b'x'; 100 * 1024])),
    );
    publish("absurd", t).await;

    let w = start(&q, p);
    eventually(WITHIN, "all three parked", || async {
        q.parked().await.len() == 3
    })
    .await;
    settle_down().await;
    assert_eq!(
        w.record.run_count("forged-death"),
        1,
        "a forged high count parks at once"
    );
    for id in ["not-an-array", "absurd"] {
        let runs = w.record.run_count(id);
        assert!((1..=4).contains(&runs), "{id}: {runs} runs, budget 4");
    }
    let parked = q.parked().await;
    let absurd = parked
        .iter()
        .find(|m| m.message.id.as_deref() == Some("absurd"))
        .unwrap();
    assert_eq!(absurd.message.body, "forever", "body kept byte for byte");
    finish(w, &q).await;
    let _ = conn.close(200, "done".into()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_megabyte_header_is_refused_by_the_broker_not_by_us() {
    // RabbitMQ's frame_max (128 KiB) bounds a message's header table: a 1 MB
    // header value never reaches a consumer. Show that the broker refuses it
    // (so the worker never has to survive one), and that the connection
    // error stays with the producer.
    let conn = Connection::connect(&crate::url(), ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let mut t = FieldTable::default();
    t.insert(
        "huge".into(),
        AMQPValue::LongString(LongString::from(vec![b'x'; 1024 * 1024])),
    );
    let props = BasicProperties::default().with_headers(t);
    let sent = async {
        ch.basic_publish(
            "".into(),
            "nowhere".into(),
            BasicPublishOptions::default(),
            b"x",
            props,
        )
        .await?
        .await
    };
    let outcome = tokio::time::timeout(Duration::from_secs(10), sent).await;
    assert!(
        !matches!(outcome, Ok(Ok(ref c)) if c.is_ack()),
        "a 1 MB header was accepted: {outcome:?}"
    );
    // The broker closed the connection over the oversize frame; a close
    // from our side may then wait for an answer that never comes (seen: a
    // run hung here for minutes), so teardown is bounded.
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.close(200, "done".into())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_mode_names_what_is_missing() {
    let p = policy();
    let cfg = |c: &mut parkway_rabbitmq::RabbitConfig| {
        c.topology = parkway_rabbitmq::TopologyMode::Verify
    };
    let config = {
        let mut c = parkway_rabbitmq::RabbitConfig::new(
            crate::url(),
            format!("pw-test-{:08x}", fastrand::u32(..)),
        );
        cfg(&mut c);
        c
    };
    let queue = config.queue.clone();
    let err = parkway_rabbitmq::RabbitTransport::connect(config, [&p])
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&format!("`{queue}`")), "{err}");
    assert!(err.to_string().contains("missing"), "{err}");
}

/// A retry copy the broker nacks is published once more, so the message
/// still waits its delay: before, the original went straight back to the
/// broker and ran again at once (seen in the practice drill: attempt 2 ran
/// twice, 6 ms apart). The injected nack follows a copy the broker did
/// take, so the second publish makes a duplicate copy: one more run, none
/// early, nothing handed back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacked_retry_copy_is_published_again_not_run_early() {
    let p = policy();
    let q = crate::queue(&p, |_| {}).await;
    q.publish("m", "fail:1").await;
    crate::faults(&q).nack_next(1);
    let w = start(&q, p);
    eventually(WITHIN, "both copies processed", || async {
        w.record.run_count("m") == 3
    })
    .await;
    settle_down().await;
    let runs = w.record.runs("m");
    assert_eq!(runs.len(), 3, "the original and the two copies");
    for later in &runs[1..] {
        let waited = later.at - runs[0].at;
        assert!(
            waited + Duration::from_millis(2) >= Duration::from_millis(300),
            "a copy ran {waited:?} after the failure, before its 300 ms delay"
        );
    }
    let s = finish(w, &q).await;
    assert_eq!(s.unsettled, 0, "the nacked copy was not handed back: {s:?}");
    assert_eq!(s.retried, 1, "{s:?}");
}
