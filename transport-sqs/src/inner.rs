//! The state one transport's clones share, and what a delivery carries.
//!
//! A received message becomes a [`Delivery`] whose private [`Token`] holds
//! its receipt handle, its body and attributes as received (copies are made
//! from these, byte for byte) and its lease. Dropping the token — after a
//! settlement, or if a delivery is ever dropped unsettled — ends the lease
//! and frees its in-flight slot, so a lost delivery is never renewed
//! forever: SQS delivers it again when its visibility runs out.

use std::{
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use aws_sdk_sqs::{
    Client,
    types::{Message as SqsMessage, MessageSystemAttributeName as Sys},
};
use parkway_core::{Delivery, Message, Origin, envelope::names};
use tokio::sync::Semaphore;

use crate::{
    SqsConfig,
    attributes::{Attributes, to_headers},
    batch::Batcher,
    intake::Intake,
    lease::Leases,
    memo::Memo,
    topology::Queues,
};

/// Plain message attributes carrying a message's identity on SQS.
pub use parkway_core::transport::identity::{CORRELATION_ID, MESSAGE_ID, MESSAGE_TYPE};

pub(crate) struct Inner {
    pub(crate) client: Client,
    pub(crate) config: SqsConfig,
    pub(crate) queues: Queues,
    pub(crate) leases: Arc<Leases>,
    pub(crate) memo: Memo,
    pub(crate) batcher: Batcher,
    pub(crate) intake: Intake,
    pub(crate) room: Arc<Semaphore>,
    pub(crate) ordered: bool,
}

/// What a delivery carries back to `settle`.
pub(crate) struct Token {
    pub(crate) lease: u64,
    pub(crate) receipt: String,
    pub(crate) sqs_id: String,
    pub(crate) body: String,
    pub(crate) attributes: Option<Attributes>,
    pub(crate) group: Option<String>,
    pub(crate) dedup: Option<String>,
    leases: Arc<Leases>,
    room: Arc<Semaphore>,
}

impl Token {
    /// The same received message under a new lease (a re-delivery by this
    /// process). The caller takes an in-flight slot for it.
    pub(crate) fn again(&self, lease: u64) -> Token {
        Token {
            lease,
            receipt: self.receipt.clone(),
            sqs_id: self.sqs_id.clone(),
            body: self.body.clone(),
            attributes: self.attributes.clone(),
            group: self.group.clone(),
            dedup: self.dedup.clone(),
            leases: self.leases.clone(),
            room: self.room.clone(),
        }
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        self.leases.remove(self.lease);
        self.room.add_permits(1);
    }
}

/// The system attributes the transport reads from a received message.
pub(crate) struct System {
    pub(crate) receive_count: u32,
    pub(crate) first_receive_ms: Option<u64>,
    pub(crate) sent_ms: Option<u64>,
    pub(crate) group: Option<String>,
    pub(crate) dedup: Option<String>,
    pub(crate) dead_letter_source: Option<String>,
}

impl System {
    pub(crate) fn of(m: &SqsMessage) -> System {
        let get = |k: Sys| m.attributes().and_then(|a| a.get(&k)).cloned();
        let num = |k: Sys| get(k).and_then(|v| v.parse::<u64>().ok());
        System {
            receive_count: num(Sys::ApproximateReceiveCount)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(1),
            first_receive_ms: num(Sys::ApproximateFirstReceiveTimestamp),
            sent_ms: num(Sys::SentTimestamp),
            group: get(Sys::MessageGroupId),
            dedup: get(Sys::MessageDeduplicationId),
            dead_letter_source: get(Sys::DeadLetterQueueSourceArn),
        }
    }
}

/// A time in epoch milliseconds as RFC 3339, the envelope's time format.
pub(crate) fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// A neutral message from a received one: attributes as headers, identity
/// from the plain attributes or the envelope, the SQS id as a last resort.
pub(crate) fn message(route: &str, m: &SqsMessage, sys: &System) -> Message {
    let headers = to_headers(m.message_attributes());
    let body = m.body().unwrap_or_default().to_owned();
    let mut message = Message::from_headers(route, sys.group.clone(), headers, body);
    if message.id.is_none() {
        message.id = m.message_id().map(str::to_owned);
    }
    message
}

impl Inner {
    /// A delivery from a received message, with its lease already running;
    /// `None` for a message without a receipt handle (nothing to settle).
    pub(crate) fn delivery(&self, m: SqsMessage) -> Option<Delivery> {
        let receipt = m.receipt_handle()?.to_owned();
        let sqs_id = m.message_id().unwrap_or_default().to_owned();
        let sys = System::of(&m);
        let mut message = message(&self.config.queue_name(), &m, &sys);
        let (remembered, uncounted) = self.memo.recall(&sqs_id);
        if let Some(envelope) = remembered {
            message
                .headers
                .retain(|k, _| !k.starts_with(parkway_core::envelope::HEADER_PREFIX));
            for (k, v) in envelope {
                message.headers.insert(k, v);
            }
        }
        // Earlier receives, less those that spent no attempt.
        let broker_attempts = sys
            .receive_count
            .saturating_sub(1)
            .saturating_sub(uncounted);
        if broker_attempts > 0 && message.headers.get(names::FIRST_FAILURE_AT).is_none() {
            if let Some(ms) = sys.first_receive_ms {
                message.headers.insert(names::FIRST_FAILURE_AT, rfc3339(ms));
            }
        }
        let origin = Origin {
            queue: Some(self.config.queue_name()),
            partition: None,
            offset: None,
        };
        let lease = self.leases.register(&receipt);
        let token = Token {
            lease,
            receipt,
            sqs_id,
            body: m.body().unwrap_or_default().to_owned(),
            attributes: m.message_attributes().cloned(),
            group: sys.group.clone(),
            dedup: sys.dedup,
            leases: self.leases.clone(),
            room: self.room.clone(),
        };
        let mut d = Delivery::new(message, origin, token).with_broker_attempts(broker_attempts);
        if let Some(g) = sys.group {
            d = d.with_lane(g);
        }
        Some(d)
    }
}
