//! # parkway-kafka
//!
//! Parkway's Kafka transport, on rdkafka (bundled librdkafka).
//!
//! - **Retry topics** (unordered policies): a retry is produced to the tier
//!   topic of its delay (`<topic>.retry.1s`, `.10s`, `.1m`, …) with its
//!   envelope and exact due time; the source offset is committed only after
//!   the delivery report. Retry records are held until due by the consumer —
//!   never by sleeping in the poll loop — while other partitions flow.
//! - **Pause-partition mode** (ordered policies, for ledgers): one record in
//!   flight per partition; a failure is retried in place and nothing behind
//!   it in that partition runs, while other partitions continue. A spent
//!   budget with `on_exhausted = "halt"` halts just that partition until an
//!   operator resumes it or skips the record to the dead-letter topic, in
//!   process or through the control topic (`<topic>.control`).
//! - **Offsets**: only the contiguous prefix of finished records is
//!   committed per partition; revoked partitions drop their in-flight state.
//! - **Dead-letter topic** as the parking lot, reading Spring Kafka's
//!   `kafka_dlt-*` headers too; redrive remembers what it replayed in a
//!   compacted topic, so running it twice never replays a record twice.

mod admin;
mod commits;
mod config;
mod control;
mod finishes;
mod halt;
mod headers;
mod parking;
mod plan;
mod pump;
mod tiers;
mod token;
mod transport;
mod verbs;

pub use admin::create_topic;
pub use config::KafkaConfig;
pub use control::OperatorAction;
pub use halt::HaltedRecord;
pub use parkway_core::TopologyMode;
pub use plan::plan;
pub use tiers::{MAX_DELAY, TierPlan};
pub use transport::{CORRELATION_ID, KafkaTransport, MESSAGE_ID, MESSAGE_TYPE};

/// The transport's kind, as in `[transport] kind`.
pub const KIND: &str = "kafka";
mod state;
