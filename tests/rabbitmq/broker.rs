//! What the broker does on its own: delivery limits, single active
//! consumers, halts.

use std::time::Duration;

use futures_util::StreamExt;
use lapin::{
    Connection, ConnectionProperties,
    options::{BasicConsumeOptions, BasicGetOptions, BasicNackOptions},
    types::FieldTable,
};
use parkway::{Backoff, OnExhausted, Ordering, RetryPolicy, WorkerError};
use parkway_rabbitmq::QueueType;

use crate::conformance::harness::{WITHIN, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_dead_lettered_by_the_delivery_limit_is_understood() {
    let p = RetryPolicy::builder().max_attempts(3).build().unwrap();
    let q = crate::queue(&p, |c| {
        c.queue_type = QueueType::Quorum;
        c.delivery_limit = Some(2);
    })
    .await;
    q.publish("crashy", "ok").await;
    // A consumer that crashes (requeues) every time, as a dying worker would.
    let conn = Connection::connect(&crate::url(), ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let names = crate::names(&q);
    let mut consumer = ch
        .basic_consume(
            names.queue.as_str().into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let requeue = BasicNackOptions {
        multiple: false,
        requeue: true,
    };
    for _ in 0..3 {
        match tokio::time::timeout(Duration::from_secs(5), consumer.next()).await {
            Ok(Some(Ok(d))) => {
                d.acker.nack(requeue).await.unwrap();
            }
            _ => break,
        }
    }
    eventually(WITHIN, "the broker parked it", || async {
        q.parked().await.len() == 1
    })
    .await;
    let parked = q.parked().await.remove(0);
    let env = parked.envelope;
    assert_eq!(
        env.reason.as_ref().map(|r| r.as_str()),
        Some("BROKER_DELIVERY_LIMIT"),
        "{env:?}"
    );
    assert!(
        env.attempts >= 1,
        "{env:?}; headers {:?}",
        parked.message.headers
    );
    assert_eq!(parked.message.body, "ok", "body kept");
    assert_eq!(env.origin.queue.as_deref(), Some(names.queue.as_str()));
    let _ = conn.close(200, "done".into()).await;
    q.publisher.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halt_stops_the_ordered_consumer_and_keeps_the_message() {
    let p = RetryPolicy::builder()
        .max_attempts(2)
        .backoff(Backoff::fixed(Duration::from_millis(100)))
        .ordering(Ordering::Ordered)
        .on_exhausted(OnExhausted::Halt)
        .build()
        .unwrap();
    let q = crate::queue(&p, |_| {}).await;
    q.publish("stuck", "forever").await;
    q.publish("behind", "ok").await;
    let handler = crate::conformance::script::Scripted::default();
    let record = handler.record.clone();
    let worker = parkway::Worker::builder(q.transport.clone(), handler)
        .policy(p)
        .build()
        .unwrap();
    let err = tokio::time::timeout(WITHIN, worker.run(std::future::pending()))
        .await
        .expect("the worker halts by itself")
        .unwrap_err();
    assert!(matches!(err, WorkerError::Halted { .. }), "{err}");
    assert!(err.to_string().contains("stuck"), "{err}");
    assert_eq!(
        record.run_count("behind"),
        0,
        "nothing behind the halted message ran"
    );
    // Both messages are still in the work queue, in order.
    let conn = Connection::connect(&crate::url(), ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let names = crate::names(&q);
    let mut ids = Vec::new();
    while let Some(m) = ch
        .basic_get(
            names.queue.as_str().into(),
            BasicGetOptions { no_ack: false },
        )
        .await
        .unwrap()
    {
        ids.push(
            m.delivery
                .properties
                .message_id()
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        );
    }
    assert_eq!(ids, ["stuck", "behind"]);
    let _ = conn.close(200, "done".into()).await;
    q.publisher.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_file_chooses_rabbitmq() {
    let queue = format!("pw-test-{:08x}", fastrand::u32(..));
    let text = format!(
        r#"
        [transport]
        kind = "rabbitmq"
        url = "{}"
        queue = "{queue}"
        queue_type = "quorum"
        prefetch = 8

        [policies.orders]
        max_attempts = 3
        backoff = {{ kind = "fixed", delay = "250ms" }}
        "#,
        crate::url()
    );
    let config = parkway::config::Config::from_toml(&text).unwrap();
    let transport = parkway::connect(&config).await.unwrap();
    assert_eq!(transport.kind(), "rabbitmq");
    let plan = transport.describe().join("\n");
    assert!(plan.contains(&format!("queue `{queue}`")), "{plan}");
    assert!(plan.contains("250ms"), "{plan}");
    assert!(
        !plan.contains("guest:guest"),
        "the password never shows: {plan}"
    );
    // Clean up through the concrete transport.
    let mut settings = parkway_rabbitmq::RabbitConfig::new(crate::url(), queue);
    settings.queue_type = QueueType::Quorum;
    let p = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_millis(250)))
        .build()
        .unwrap();
    let t = parkway_rabbitmq::RabbitTransport::connect(settings, [&p])
        .await
        .unwrap();
    t.delete_topology().await.unwrap();
}
