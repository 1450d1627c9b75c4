//! The parking lot contract: browse without consuming, and sweep.
//!
//! Why a sweep with a callback rather than "move message X"? Brokers differ
//! in what they can address: a Kafka DLT by offset, an SQS DLQ only by
//! receiving, a RabbitMQ queue only from its head. A single pass over the lot
//! in order, asking core for each message whether to move it, fits all of
//! them, and keeps the selection, limits and pacing in core
//! ([`crate::redrive`]).

use std::time::SystemTime;

use async_trait::async_trait;

use super::{Message, TransportError};
use crate::envelope::{Envelope, Headers};

/// A parked message as seen when browsing.
#[derive(Debug, Clone, PartialEq)]
pub struct Parked {
    /// The transport's id for this parked copy (stable while it is parked).
    pub id: String,
    /// The message, body byte for byte, headers including the envelope.
    pub message: Message,
    /// The decoded envelope.
    pub envelope: Envelope,
    /// When it was parked, if the transport knows.
    pub parked_at: Option<SystemTime>,
}

impl Parked {
    /// A parked message; the envelope is decoded from its headers.
    pub fn new(id: impl Into<String>, message: Message, parked_at: Option<SystemTime>) -> Self {
        let envelope = Envelope::decode(&message.headers);
        Parked {
            id: id.into(),
            message,
            envelope,
            parked_at,
        }
    }
}

/// What to do with one parked message during a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Move it back to its origin with these headers (replay envelope set).
    Move(Headers),
    /// Leave it parked, in its place.
    Keep,
    /// End the sweep; this and every later message stay parked.
    Stop,
}

/// Core's side of a sweep: chooses per message and hears the outcome.
#[async_trait]
pub trait Selector: Send {
    /// Chooses what happens to `parked`. May wait (rate limiting).
    async fn choose(&mut self, parked: &Parked) -> Choice;
    /// The result of a [`Choice::Move`]: `Ok` once the copy is durably
    /// accepted at the origin and removed from the lot.
    fn moved(&mut self, parked: &Parked, result: Result<(), TransportError>);
}

/// A transport's parking lot.
#[async_trait]
pub trait ParkingLot: Send + Sync + std::fmt::Debug {
    /// Up to `limit` parked messages, oldest first, without consuming or
    /// reordering anything.
    async fn browse(&self, limit: usize) -> Result<Vec<Parked>, TransportError>;

    /// One pass over the lot in order, asking `selector` about each message.
    /// A moved message is published to its origin (durably accepted) before
    /// it is removed from the lot; kept messages keep their relative order.
    async fn sweep(&self, selector: &mut dyn Selector) -> Result<(), TransportError>;
}
