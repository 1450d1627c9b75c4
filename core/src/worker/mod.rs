//! The worker: one loop that drives any transport.
//!
//! It takes deliveries with bounded concurrency, runs the handler with a
//! timeout (panics caught), asks [`crate::decide()`] what to do on failure and
//! has the transport carry it out. Ordered policies keep one message in
//! flight per lane (partition, group or key) while other lanes go on.
//! Shutdown stops taking, lets in-flight work finish, and hands back — never
//! acknowledges — work that had not started.

mod builder;
mod handler;
mod intake;
mod meters;
mod process;
mod router;
mod run;

pub use builder::WorkerBuilder;
pub use handler::Handler;
pub use router::{NamedPolicy, Router, UnknownPolicy};

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering as AtomicOrdering},
    },
    time::Duration,
};

use crate::{
    backoff::Dice,
    clock::Clock,
    decide::Decision,
    envelope::EnvelopeLimits,
    failure::{Classifier, FailureClass, Reason},
    transport::{PlanError, PolicyPlan, Transport, TransportError},
};

/// Why the worker stopped with an error, or refused to start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// A policy the transport cannot carry out.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A worker setting out of range.
    #[error("invalid worker setting {setting}: {why}")]
    Setting {
        /// The setting.
        setting: &'static str,
        /// Why.
        why: &'static str,
    },
    /// A policy with `on_exhausted = "halt"` spent its budget.
    #[error(
        "halted: message {message_id} on route `{route}` spent the budget of policy `{policy}` (reason {reason}); it was left unacknowledged"
    )]
    Halted {
        /// The policy.
        policy: String,
        /// The route.
        route: String,
        /// The message id, or `-`.
        message_id: String,
        /// The last failure's reason.
        reason: Reason,
    },
    /// The transport failed in a way retrying cannot fix.
    #[error("transport failed: {0}")]
    Transport(#[from] TransportError),
}

impl WorkerError {
    /// Whether restarting the worker as-is may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            WorkerError::Transport(e) => e.is_retryable(),
            _ => false,
        }
    }
}

/// One step of a message's lifecycle, reported to an observer.
#[derive(Debug, Clone)]
pub struct Step {
    /// The message id, if any.
    pub message_id: Option<String>,
    /// The route.
    pub route: String,
    /// The policy applied.
    pub policy: String,
    /// Broker-level attempt (1-based).
    pub attempt: u32,
    /// In-process try within the attempt (1-based).
    pub local_attempt: u32,
    /// `None` when the attempt succeeded.
    pub failure: Option<(FailureClass, Reason)>,
    /// What was decided (`None` on success).
    pub decision: Option<Decision>,
}

/// Counts of one run, returned when the worker stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Deliveries taken from the transport.
    pub received: u64,
    /// Acknowledged after success.
    pub acked: u64,
    /// Acknowledged as duplicates.
    pub duplicates: u64,
    /// Sent back for a later retry.
    pub retried: u64,
    /// Parked.
    pub parked: u64,
    /// Discarded.
    pub discarded: u64,
    /// Handed back unprocessed (shutdown, halt, failed settlement).
    pub released: u64,
    /// Settlements the transport did not accept.
    pub unsettled: u64,
    /// Halted in place: left unacknowledged in a lane that waits for an
    /// operator (transports with [`crate::Capabilities::halts_in_place`]).
    pub halted: u64,
}

#[derive(Debug, Default)]
struct Counters {
    received: AtomicU64,
    acked: AtomicU64,
    duplicates: AtomicU64,
    retried: AtomicU64,
    parked: AtomicU64,
    discarded: AtomicU64,
    released: AtomicU64,
    unsettled: AtomicU64,
    halted: AtomicU64,
}

impl Counters {
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, AtomicOrdering::Relaxed);
    }

    fn summary(&self) -> RunSummary {
        let g = |c: &AtomicU64| c.load(AtomicOrdering::Relaxed);
        RunSummary {
            received: g(&self.received),
            acked: g(&self.acked),
            duplicates: g(&self.duplicates),
            retried: g(&self.retried),
            parked: g(&self.parked),
            discarded: g(&self.discarded),
            released: g(&self.released),
            unsettled: g(&self.unsettled),
            halted: g(&self.halted),
        }
    }
}

type Observer = Arc<dyn Fn(&Step) + Send + Sync>;

/// Everything the per-message tasks share.
struct Ctx<H> {
    transport: Arc<dyn Transport>,
    handler: H,
    router: Router,
    classifier: Arc<dyn Classifier>,
    clock: Arc<dyn Clock>,
    dice: Arc<dyn Dice>,
    limits: EnvelopeLimits,
    handler_timeout: Duration,
    early_hold_limit: Duration,
    handler_version: Option<String>,
    observer: Option<Observer>,
    counters: Counters,
    meters: meters::Meters,
}

/// A configured worker; start it with [`Worker::run`].
pub struct Worker<H> {
    ctx: Ctx<H>,
    concurrency: usize,
    plans: Vec<PolicyPlan>,
}

impl<H: Handler> Worker<H> {
    /// Starts configuring a worker for `transport` and `handler`.
    pub fn builder(transport: Arc<dyn Transport>, handler: H) -> WorkerBuilder<H> {
        WorkerBuilder::new(transport, handler)
    }

    /// What each policy gets from the transport (checked at build time).
    pub fn plans(&self) -> &[PolicyPlan] {
        &self.plans
    }
}

impl<H> fmt::Debug for Worker<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("transport", &self.ctx.transport.kind())
            .field("concurrency", &self.concurrency)
            .field("handler_timeout", &self.ctx.handler_timeout)
            .field("plans", &self.plans)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod tests;
