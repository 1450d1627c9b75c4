//! The small, copyable slice of the envelope that `decide` reads.

use std::time::{Duration, SystemTime};

/// Retry state of one delivery, as reconciled from envelope and broker.
///
/// `attempts` counts failed attempts *before* the current one;
/// `local_attempt` is the current in-process try (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryState {
    /// Failed broker-level attempts before this one.
    pub attempts: u32,
    /// The current in-process try, starting at 1.
    pub local_attempt: u32,
    /// When the first failure happened.
    pub first_failure_at: Option<SystemTime>,
    /// Sum of delays waited so far.
    pub total_delay: Duration,
    /// The latest delay.
    pub last_delay: Option<Duration>,
}

impl Default for RetryState {
    fn default() -> Self {
        RetryState {
            attempts: 0,
            local_attempt: 1,
            first_failure_at: None,
            total_delay: Duration::ZERO,
            last_delay: None,
        }
    }
}

impl RetryState {
    /// The state after an attempt failed and the message waits `delay` in
    /// place (ordered mode) before the next attempt.
    #[must_use]
    pub fn after_wait(self, now: SystemTime, delay: Duration) -> Self {
        RetryState {
            attempts: self.attempts.saturating_add(1),
            local_attempt: 1,
            first_failure_at: Some(self.first_failure_at.unwrap_or(now)),
            total_delay: self.total_delay.saturating_add(delay),
            last_delay: Some(delay),
        }
    }

    /// Age since the first failure (zero before any failure).
    pub fn age(&self, now: SystemTime) -> Duration {
        self.first_failure_at
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default()
    }
}
