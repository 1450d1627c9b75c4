//! # parkway-rabbitmq
//!
//! Parkway's RabbitMQ transport, on lapin. It carries out core's decisions
//! with RabbitMQ's own means:
//!
//! - **retry later**: the copy, with its updated envelope, is published
//!   (mandatory, persistent, publisher-confirmed) to the wait queue of its
//!   delay tier; the queue's `x-message-ttl` expires it and its dead-letter
//!   exchange routes it back to the work exchange. The original is acked only
//!   after the confirm.
//! - **park**: the same, into a durable parking queue that has no consumer.
//! - **ordered mode**: a single active consumer with prefetch 1; retries
//!   happen in place.
//! - **redrive**: a sweep over the parking queue that republishes the chosen
//!   messages (with confirms) and leaves the others in their order.
//!
//! The retry rules stay in `parkway-core`; nothing here decides.

mod config;
mod names;
mod plan;
mod tiers;

pub use config::{QueueType, RabbitConfig};
pub use names::Names;
pub use parkway_core::TopologyMode;
pub use plan::plan;
pub use tiers::{HOLD_CAP, MAX_TIERS, MAX_TTL, TierPlan, TooManyTiers};

/// The transport's kind, as in `[transport] kind`.
pub const KIND: &str = "rabbitmq";
mod confirms;
#[cfg(feature = "fault-injection")]
mod faults;
mod headers;
mod link;
mod parking;
mod publish;
mod topology;
mod transport;

#[cfg(feature = "fault-injection")]
pub use faults::Faults;
pub use transport::RabbitTransport;
