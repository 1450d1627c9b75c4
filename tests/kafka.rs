//! The conformance suite on a real Kafka-protocol broker (start it with
//! `scripts/kafka-start`; `PARKWAY_KAFKA_BOOTSTRAP` overrides the address).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests abort on setup failure

mod conformance;

use std::sync::Arc;

use async_trait::async_trait;
use conformance::{Broker, Publish, Queue};
use parkway::{Message, RetryPolicy, TransportError};
use parkway_kafka::{KafkaConfig, KafkaTransport};

/// The broker address.
pub(crate) fn bootstrap() -> String {
    std::env::var("PARKWAY_KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

/// A transport on a fresh, randomly named topic with `partitions`.
pub(crate) async fn transport(
    policy: &RetryPolicy,
    partitions: i32,
    tweak: impl FnOnce(&mut KafkaConfig),
) -> KafkaTransport {
    let topic = format!("pw-test-{:08x}", fastrand::u32(..));
    parkway_kafka::create_topic(&bootstrap(), &topic, partitions)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach Kafka at {}: {e}\n  run scripts/kafka-start first",
                bootstrap()
            )
        });
    let mut config = KafkaConfig::new(bootstrap(), format!("{topic}-group"), topic);
    config
        .librdkafka
        .insert("fetch.wait.max.ms".into(), "20".into());
    config
        .librdkafka
        .insert("session.timeout.ms".into(), "6000".into());
    tweak(&mut config);
    KafkaTransport::connect(config, [policy])
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach Kafka at {}: {e}\n  run scripts/kafka-start first",
                bootstrap()
            )
        })
}

/// Publishes through a transport; deletes its topics at the end.
pub(crate) struct Producer(pub(crate) KafkaTransport);

#[async_trait]
impl Publish for Producer {
    async fn publish(&self, msg: Message) -> Result<(), TransportError> {
        self.0.publish(&msg).await
    }

    async fn teardown(&self) {
        // Topics stay on the memory-only test broker (random names): deleting
        // topics that librdkafka clients still hold crashes librdkafka 2.12's
        // metadata cache against this broker.
        self.0.close().await;
    }
}

#[path = "kafka/backpressure.rs"]
mod backpressure;
#[path = "kafka/crash.rs"]
mod crash;
#[path = "support/crash_log.rs"]
mod crash_log;
#[path = "kafka/drill.rs"]
mod drill;
#[path = "kafka/flood.rs"]
mod flood;
#[path = "kafka/halt.rs"]
mod halt;
#[path = "kafka/ledger.rs"]
mod ledger;

struct Kafka;

#[async_trait]
impl Broker for Kafka {
    fn name(&self) -> &'static str {
        "kafka"
    }

    async fn queue(&self, policy: &RetryPolicy) -> Queue {
        let t = transport(policy, 1, |_| {}).await;
        Queue {
            transport: Arc::new(t.clone()),
            publisher: Arc::new(Producer(t)),
        }
    }
}

conformance_suite!(Kafka);
