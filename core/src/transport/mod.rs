//! The transport contract: what a broker must do for the lifecycle.
//!
//! A transport supplies [`Delivery`]s and carries out settlements. It never
//! decides anything: the worker asks [`crate::decide()`] and tells the
//! transport what to do with a [`Settle`]. Settling takes the delivery by
//! value and, if the broker did not accept the action, gives it back in
//! [`Unsettled`] — the original is acknowledged only after its retry or
//! parked copy is durably accepted, and never if anything failed.
//!
//! The shape fits the three brokers without bending: a RabbitMQ delivery tag
//! with publisher confirms, a Kafka offset whose commit must stay contiguous
//! per partition, an SQS receipt handle with a visibility timeout (which is
//! also why [`Transport::hold`] exists: the worker tells the transport when
//! it keeps a delivery for a while).

mod capabilities;
mod error;
mod message;
mod parking;
mod plan;
mod topology;

pub use capabilities::{Capabilities, DelayMode, PlanError, PolicyPlan};
pub use error::{ErrorKind, TransportError};
pub use message::{Delivery, Message, identity};
pub use parking::{Choice, Parked, ParkingLot, Selector};
pub use plan::TopologyPlan;
pub use topology::TopologyMode;

use std::time::Duration;

use async_trait::async_trait;

use crate::envelope::Headers;

/// How to settle a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settle {
    /// Done: acknowledge / delete / mark the offset complete.
    Ack,
    /// Deliver a copy with `headers` again after `delay`, then acknowledge
    /// the original once the copy is durably accepted.
    Retry {
        /// How long until the copy is delivered.
        delay: Duration,
        /// The message's headers with the updated envelope.
        headers: Headers,
    },
    /// Put a copy with `headers` in the parking lot, then acknowledge.
    Park {
        /// The message's headers with the final envelope.
        headers: Headers,
    },
    /// Acknowledge without retrying or parking (the worker counts it).
    Discard,
    /// Give it back to the broker unprocessed, without spending its budget
    /// (shutdown, a halted worker): nack-requeue, no commit, visibility 0.
    Release,
    /// Keep it unacknowledged and stop its lane in place until an operator
    /// acts (resume it, or send it to the parking lot with `headers`). Only
    /// sent to transports whose [`Capabilities::halts_in_place`] is true;
    /// others stop the whole worker instead.
    Halt {
        /// The message's headers with the final envelope, for the parked
        /// copy should the operator skip it.
        headers: Headers,
    },
}

impl Settle {
    /// A short name for logs.
    pub const fn name(&self) -> &'static str {
        match self {
            Settle::Ack => "ack",
            Settle::Retry { .. } => "retry",
            Settle::Park { .. } => "park",
            Settle::Discard => "discard",
            Settle::Release => "release",
            Settle::Halt { .. } => "halt",
        }
    }
}

/// A settlement the broker did not accept; the delivery is handed back
/// unacknowledged.
#[derive(Debug, thiserror::Error)]
#[error("could not {action}: {error}")]
pub struct Unsettled {
    /// What was attempted.
    pub action: &'static str,
    /// Why it failed.
    #[source]
    pub error: TransportError,
    /// The delivery, still unacknowledged.
    pub delivery: Delivery,
}

impl Unsettled {
    /// `action` on `delivery` failed with `error`; the delivery goes back.
    pub fn new(action: &Settle, error: TransportError, delivery: Delivery) -> Self {
        Unsettled {
            action: action.name(),
            error,
            delivery,
        }
    }
}

/// A broker transport. Object-safe: a transport chosen in config is a
/// `Box<dyn Transport>`.
#[async_trait]
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// Short name (`memory`, `rabbitmq`, …) for logs, metrics and errors.
    fn kind(&self) -> &'static str;

    /// What this transport supports.
    fn capabilities(&self) -> Capabilities;

    /// The next delivery; `Ok(None)` once the transport is closed. Must be
    /// cancel-safe: dropping the future loses no delivery.
    async fn receive(&self) -> Result<Option<Delivery>, TransportError>;

    /// Up to `max` deliveries at once, appended to `into`, waiting only for
    /// the first; returns how many were added, `0` only once the transport
    /// is closed. Cancel-safe like [`Transport::receive`].
    ///
    /// The worker takes deliveries this way when it has several free slots,
    /// and still runs them concurrently. A transport that hands deliveries
    /// out of a shared buffer overrides it to take several under one lock
    /// and one wake-up; the default receives one.
    async fn receive_many(
        &self,
        into: &mut Vec<Delivery>,
        max: usize,
    ) -> Result<usize, TransportError> {
        let _ = max;
        Ok(match self.receive().await? {
            Some(d) => {
                into.push(d);
                1
            }
            None => 0,
        })
    }

    /// Carries out a settlement. On failure the delivery comes back, still
    /// unacknowledged, so the broker will deliver it again.
    async fn settle(&self, delivery: Delivery, action: Settle) -> Result<(), Unsettled>;

    /// The worker keeps `delivery` in process for about `duration` (local
    /// retry or ordered-mode pause): extend its lease if the broker has one.
    async fn hold(&self, delivery: &Delivery, duration: Duration) -> Result<(), TransportError> {
        let _ = (delivery, duration);
        Ok(())
    }

    /// The worker has stopped taking deliveries: hand back anything the
    /// transport fetched ahead (prefetch buffers) so another consumer can
    /// have it. `receive` may be called again later.
    async fn stop_receiving(&self) {}

    /// The parking lot of this transport's source.
    fn parking_lot(&self) -> &dyn ParkingLot;

    /// The transport's compiled plan in readable lines (topology, delay
    /// tiers, limits), printed by the start-up check.
    fn describe(&self) -> Vec<String> {
        Vec::new()
    }
}
