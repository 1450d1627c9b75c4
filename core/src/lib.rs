//! # parkway-core
//!
//! The retry lifecycle every Parkway transport carries out:
//! **classify → budget → backoff with jitter → park → redrive**.
//!
//! This crate knows no broker. It holds the rules ([`decide()`]), the state
//! that travels with a message ([`Envelope`]), the contract a broker
//! transport implements ([`Transport`], [`ParkingLot`], [`Capabilities`]),
//! the [`Worker`] loop that drives any transport, the redrive engine, the
//! config file format, and the in-memory transport ([`memory`]) that is the
//! embedded default and the reference for the others' semantics.
#![doc(test(attr(deny(warnings))))]

pub mod backoff;
pub mod decide;
pub mod envelope;
pub mod failure;
pub mod policy;

pub use backoff::{Backoff, Dice, InvalidBackoff, Jitter, SeededDice, Strategy, ThreadDice};
pub use decide::{Decision, decide};
pub use envelope::{Envelope, EnvelopeLimits, Headers, InvalidLimits, Origin, Replay, RetryState};
pub use failure::{
    Classified, Classifier, Failure, FailureClass, InvalidClass, InvalidReason, Reason,
    RuleClassifier,
};
pub use policy::{InvalidPolicy, OnExhausted, Ordering, RetryPolicy, RetryPolicyBuilder};

pub mod clock;
pub mod memory;
pub mod redrive;
pub mod transport;
pub mod worker;

pub use clock::{Clock, SystemClock, TokioClock};
pub use transport::{
    Capabilities, Choice, DelayMode, Delivery, ErrorKind, Message, Parked, ParkingLot, PlanError,
    PolicyPlan, Selector, Settle, TopologyMode, Transport, TransportError, Unsettled,
};
pub use worker::{Handler, RunSummary, Step, Worker, WorkerError};
pub mod config;
