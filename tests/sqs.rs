//! The conformance suite and SQS-specific tests on a real SQS emulator
//! (start it with `scripts/sqs-start`; `PARKWAY_SQS_ENDPOINT` overrides the
//! address). Every test makes its own randomly named queues. A test that
//! cannot reach the emulator fails, naming `scripts/sqs-start`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests abort on setup failure

mod conformance;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use conformance::{Broker, Publish, Queue};
use parkway::{Message, Ordering, RetryPolicy, TransportError};
use parkway_sqs::{CredentialSource, SqsConfig, SqsTransport};

/// The emulator's address.
pub(crate) fn endpoint() -> String {
    std::env::var("PARKWAY_SQS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:4566".into())
}

/// Settings for a fresh, randomly named queue (FIFO if `fifo`), signed
/// with the emulator's placeholder keys.
pub(crate) fn config(fifo: bool) -> SqsConfig {
    let name = format!(
        "pw-test-{:08x}{}",
        fastrand::u32(..),
        if fifo { ".fifo" } else { "" }
    );
    config_for(&name)
}

/// Settings for an existing queue name.
pub(crate) fn config_for(name: &str) -> SqsConfig {
    let mut c = SqsConfig::new(name);
    c.endpoint = Some(endpoint());
    c.region = Some("us-east-1".into());
    c.credentials = CredentialSource::Emulator;
    c.wait_time = Duration::from_secs(2);
    c.call_timeout = Duration::from_secs(10);
    c.visibility_timeout = Duration::from_secs(10);
    c
}

/// Connects, failing loudly when the emulator is not there.
pub(crate) async fn connect(config: SqsConfig, policy: &RetryPolicy) -> SqsTransport {
    SqsTransport::connect(config, [policy])
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach the SQS emulator at {}: {e}\n  run scripts/sqs-start first",
                endpoint()
            )
        })
}

/// A transport on fresh queues; FIFO when the policy is ordered.
pub(crate) async fn transport(
    policy: &RetryPolicy,
    tweak: impl FnOnce(&mut SqsConfig),
) -> SqsTransport {
    let mut c = config(policy.ordering() == Ordering::Ordered);
    tweak(&mut c);
    connect(c, policy).await
}

/// Publishes through a transport; deletes its queues at the end.
pub(crate) struct Producer(pub(crate) SqsTransport);

#[async_trait]
impl Publish for Producer {
    async fn publish(&self, msg: Message) -> Result<(), TransportError> {
        self.0.publish(&msg).await
    }

    async fn teardown(&self) {
        if let Err(e) = self.0.delete_queues().await {
            eprintln!("could not delete the test queues: {e}");
        }
    }
}

/// A conformance queue around a transport.
pub(crate) fn queue(t: &SqsTransport) -> Queue {
    Queue {
        transport: Arc::new(t.clone()),
        publisher: Arc::new(Producer(t.clone())),
    }
}

#[path = "sqs/crash.rs"]
mod crash;
#[path = "support/crash_log.rs"]
mod crash_log;
#[path = "sqs/drill.rs"]
mod drill;
#[path = "sqs/fifo.rs"]
mod fifo;
#[path = "sqs/heartbeat.rs"]
mod heartbeat;
#[path = "sqs/limits.rs"]
mod limits;
#[path = "sqs/move_task.rs"]
mod move_task;
#[path = "sqs/resend.rs"]
mod resend;
#[path = "sqs/short_delay.rs"]
mod short_delay;
#[path = "sqs/topology.rs"]
mod topology;

struct Sqs;

#[async_trait]
impl Broker for Sqs {
    fn name(&self) -> &'static str {
        "sqs"
    }

    async fn queue(&self, policy: &RetryPolicy) -> Queue {
        queue(&transport(policy, |_| {}).await)
    }
}

conformance_suite!(Sqs);
