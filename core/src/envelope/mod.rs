//! The envelope: retry state that travels with the message.
//!
//! Why headers and not a database? Because the message must carry enough to
//! answer "what failed, when, how often, why, is it safe to replay?" wherever
//! it ends up — a wait queue, a retry topic, a parking lot — with no other
//! system to ask. One codec ([`Envelope::encode`] / [`Envelope::decode`])
//! writes and reads it for every transport. It is bounded (see
//! [`EnvelopeLimits`]) and tolerant: a forged or garbled header is ignored,
//! never trusted to grant retries and never a reason to crash.

mod codec;
mod headers;
mod limits;
mod state;

pub use codec::{HEADER_PREFIX, names};
pub use headers::Headers;
pub use limits::{EnvelopeLimits, InvalidLimits, MIN_ENVELOPE_BYTES};
pub use state::RetryState;

pub(crate) use limits::truncate;

use std::time::{Duration, SystemTime};

use crate::failure::{Classified, FailureClass, Reason};

/// Where a message was consumed from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// Queue or topic name.
    pub queue: Option<String>,
    /// Partition (Kafka).
    pub partition: Option<i32>,
    /// Offset (Kafka) or sequence number.
    pub offset: Option<i64>,
}

/// Who replayed a parked message, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replay {
    /// Identifier of the redrive run.
    pub id: String,
    /// The operator who ran it.
    pub by: String,
    /// Why it was run (e.g. `SCHEMA_HANDLER_FIXED`).
    pub reason: String,
    /// Attempts the message had used before it was replayed.
    pub original_attempts: u32,
}

/// Canonical retry metadata of one message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Envelope {
    /// Failed attempts recorded so far.
    pub attempts: u32,
    /// When the first failure happened.
    pub first_failure_at: Option<SystemTime>,
    /// When the latest failure happened.
    pub last_failure_at: Option<SystemTime>,
    /// Sum of the delays waited so far.
    pub total_delay: Duration,
    /// The latest delay (decorrelated jitter grows from it).
    pub last_delay: Option<Duration>,
    /// When the pending retry is due. A transport whose delays are tiered
    /// may deliver a little early; the worker then waits for this time.
    pub due_at: Option<SystemTime>,
    /// Class of the latest failure.
    pub class: Option<FailureClass>,
    /// Reason of the latest failure.
    pub reason: Option<Reason>,
    /// The latest error text, truncated.
    pub last_error: Option<String>,
    /// Where the message was first consumed from.
    pub origin: Origin,
    /// The message's id.
    pub message_id: Option<String>,
    /// The correlation id.
    pub correlation_id: Option<String>,
    /// The message's type, for filtering.
    pub message_type: Option<String>,
    /// The version of the handler that failed last.
    pub handler_version: Option<String>,
    /// Set on messages moved back by a redrive.
    pub replay: Option<Replay>,
}

impl Envelope {
    /// The retry state the rules work on: the attempt count is the maximum of
    /// this envelope's count and `broker_attempts` (the broker's own count of
    /// earlier deliveries), so a forged low header cannot buy retries; a
    /// first-failure time in the future is taken as `now`.
    pub fn retry_state(&self, broker_attempts: Option<u32>, now: SystemTime) -> RetryState {
        self.retry_state_at(broker_attempts, || now)
    }

    /// [`Envelope::retry_state`], reading the clock only if the message
    /// failed before: a first attempt, most messages under load, needs no
    /// time.
    pub(crate) fn retry_state_at(
        &self,
        broker_attempts: Option<u32>,
        now: impl FnOnce() -> SystemTime,
    ) -> RetryState {
        let attempts = self.attempts.max(broker_attempts.unwrap_or(0));
        let first_failure_at = match self.first_failure_at {
            Some(t) => Some(t.min(now())),
            None if attempts > 0 => Some(now()),
            None => None,
        };
        RetryState {
            attempts,
            local_attempt: 1,
            first_failure_at,
            total_delay: self.total_delay,
            last_delay: self.last_delay,
        }
    }

    /// Records a failure that ended an attempt: counts it (on top of the
    /// reconciled `state`), stamps the times, and keeps the bounded error.
    pub fn record_failure(
        &mut self,
        state: &RetryState,
        failure: &Classified,
        error: &str,
        now: SystemTime,
        delay: Option<Duration>,
    ) {
        self.attempts = state.attempts.saturating_add(1);
        self.first_failure_at = Some(state.first_failure_at.unwrap_or(now));
        self.last_failure_at = Some(now);
        self.class = Some(failure.class);
        self.reason = Some(failure.reason.clone());
        self.last_error = Some(truncate(error, codec::MAX_DECODED_ERROR).to_owned());
        self.total_delay = state.total_delay.saturating_add(delay.unwrap_or_default());
        self.last_delay = delay.or(state.last_delay);
        self.due_at = delay.map(|d| now + d);
    }

    /// Prepares a parked message for replay: a fresh budget, the history kept
    /// in [`Replay::original_attempts`].
    pub fn into_replay(mut self, id: &str, by: &str, reason: &str) -> Self {
        let original = self
            .replay
            .as_ref()
            .map_or(0, |r| r.original_attempts)
            .saturating_add(self.attempts);
        self.replay = Some(Replay {
            id: id.to_owned(),
            by: by.to_owned(),
            reason: reason.to_owned(),
            original_attempts: original,
        });
        self.attempts = 0;
        self.first_failure_at = None;
        self.last_failure_at = None;
        self.total_delay = Duration::ZERO;
        self.last_delay = None;
        self.due_at = None;
        self
    }

    /// Age since the first failure, if there was one.
    pub fn age(&self, now: SystemTime) -> Option<Duration> {
        self.first_failure_at
            .map(|t| now.duration_since(t).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests;
