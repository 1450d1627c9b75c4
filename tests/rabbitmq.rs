//! The conformance suite on a real RabbitMQ (start it with
//! `scripts/rabbitmq-start`; `PARKWAY_RABBITMQ_URL` overrides the address).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests abort on setup failure

mod conformance;

use std::sync::Arc;

use async_trait::async_trait;
use conformance::{Broker, Publish, Queue};
use parkway::{Message, RetryPolicy, TransportError};
use parkway_rabbitmq::{RabbitConfig, RabbitTransport};

/// The broker address.
pub(crate) fn url() -> String {
    std::env::var("PARKWAY_RABBITMQ_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// A transport on a fresh, randomly named queue; fails (never skips) with
/// the script to run when the broker is not there.
/// A transport on a fresh queue.
pub(crate) async fn transport(
    policy: &RetryPolicy,
    tweak: impl FnOnce(&mut RabbitConfig),
) -> RabbitTransport {
    let mut config = RabbitConfig::new(url(), format!("pw-test-{:08x}", fastrand::u32(..)));
    tweak(&mut config);
    RabbitTransport::connect(config, [policy])
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach RabbitMQ at {}: {e}\n  run scripts/rabbitmq-start first",
                url()
            )
        })
}

/// A conformance queue plus the RabbitMQ transport behind it.
pub(crate) struct RabbitQueue {
    queue: Queue,
    /// The transport, for RabbitMQ-only hooks.
    pub(crate) rabbit: RabbitTransport,
}

impl std::ops::Deref for RabbitQueue {
    type Target = Queue;
    fn deref(&self) -> &Queue {
        &self.queue
    }
}

/// A fresh queue on the shared broker.
pub(crate) async fn queue(
    policy: &RetryPolicy,
    tweak: impl FnOnce(&mut RabbitConfig),
) -> RabbitQueue {
    let t = transport(policy, tweak).await;
    RabbitQueue {
        queue: Queue {
            transport: Arc::new(t.clone()),
            publisher: Arc::new(Producer(t.clone())),
        },
        rabbit: t,
    }
}

/// The fault-injection hooks of a queue's transport.
pub(crate) fn faults(q: &RabbitQueue) -> &parkway_rabbitmq::Faults {
    q.rabbit.faults()
}

/// The names of a queue's topology.
pub(crate) fn names(q: &RabbitQueue) -> parkway_rabbitmq::Names {
    q.rabbit.names().clone()
}

#[path = "rabbitmq/broker.rs"]
mod broker;
#[path = "rabbitmq/drill.rs"]
mod drill;
#[path = "rabbitmq/faults.rs"]
mod faults_tests;
#[path = "rabbitmq/flood.rs"]
mod flood;
#[path = "rabbitmq/restart.rs"]
mod restart;

struct Rabbit;

/// Publishes through a transport; tears its topology down.
pub(crate) struct Producer(pub(crate) RabbitTransport);

#[async_trait]
impl Publish for Producer {
    async fn publish(&self, msg: Message) -> Result<(), TransportError> {
        self.0.publish(&msg).await
    }

    async fn teardown(&self) {
        let _ = self.0.delete_topology().await;
        self.0.close().await;
    }
}

#[async_trait]
impl Broker for Rabbit {
    fn name(&self) -> &'static str {
        "rabbitmq"
    }

    async fn queue(&self, policy: &RetryPolicy) -> Queue {
        queue(policy, |_| {}).await.queue
    }
}

conformance_suite!(Rabbit);
