//! The conformance suite on the in-memory transport (no broker needed).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests abort on setup failure

mod conformance;

use std::sync::Arc;

use async_trait::async_trait;
use conformance::{Broker, Publish, Queue};
use parkway::{Message, RetryPolicy, TransportError, memory::MemoryTransport};

struct Memory;

struct MemoryPublisher(MemoryTransport);

#[async_trait]
impl Publish for MemoryPublisher {
    async fn publish(&self, msg: Message) -> Result<(), TransportError> {
        self.0.publish(msg);
        Ok(())
    }
}

#[async_trait]
impl Broker for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn queue(&self, _policy: &RetryPolicy) -> Queue {
        let t = MemoryTransport::new(format!("conformance-{:08x}", fastrand::u32(..)));
        Queue {
            transport: Arc::new(t.clone()),
            publisher: Arc::new(MemoryPublisher(t)),
        }
    }
}

conformance_suite!(Memory);
