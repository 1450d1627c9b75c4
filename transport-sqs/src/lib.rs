//! # parkway-sqs
//!
//! Parkway's SQS transport, on `aws-sdk-sqs` (region and credentials from
//! the standard AWS chain; `region` and `endpoint` can override it).
//!
//! - **Queues**: a source queue and its dead-letter queue, declared or
//!   verified, with a `RedrivePolicy` whose `maxReceiveCount` is the
//!   policies' attempts plus a margin (the crash safety net) and a
//!   `RedriveAllowPolicy` admitting only this source. Standard or FIFO.
//! - **Receive**: long polls of ten, bounded in-flight messages, and a
//!   visibility heartbeat that renews every unsettled message's lease, so a
//!   slow handler is never processed twice.
//! - **Retry**: `ChangeMessageVisibility(delay)` (≤ 12 h; the attempt is
//!   `ApproximateReceiveCount` reconciled with the envelope) or a re-send
//!   with `DelaySeconds` (≤ 15 min) then delete; the limits are the
//!   transport's capabilities, so the start-up check refuses longer delays.
//! - **Park**: the body byte for byte and the envelope in one compact
//!   attribute, sent to the DLQ, then the original deleted.
//! - **FIFO ordered mode**: the failing head of a group is retried in place
//!   (its visibility extended while the worker waits); other groups flow.
//! - **Redrive**: filtered through core's `redrive()` over the parking lot,
//!   or native and bulk with message-move tasks.

mod attributes;
mod batch;
mod client;
mod config;
mod inner;
mod intake;
mod lease;
mod memo;
mod move_task;
mod parking;
mod plan;
mod redeliver;
mod settle;
mod topology;
mod transport;

pub use attributes::{ENVELOPE_ATTRIBUTE, MAX_ATTRIBUTES, MAX_MESSAGE_BYTES};
pub use config::{CredentialSource, MAX_SEND_DELAY, MAX_VISIBILITY, RetryMode, SqsConfig};
pub use inner::{CORRELATION_ID, MESSAGE_ID, MESSAGE_TYPE};
pub use move_task::{MAX_MOVE_RATE, MoveTask};
pub use parking::NATIVE_REASON;
pub use parkway_core::TopologyMode;
pub use plan::plan;
pub use topology::MAX_RECEIVE_COUNT;
pub use transport::SqsTransport;

/// The transport's kind, as in `[transport] kind`.
pub const KIND: &str = "sqs";
