//! `decide`: every retry rule, once.
//!
//! Transports never ask "should this be retried?" — they carry out the
//! [`Decision`] this pure function returns. Keeping all the rules here means
//! the same policy behaves the same on every broker, and each rule has a unit
//! test that needs no broker, no clock and no luck: time and the jitter roll
//! are arguments.
//!
//! The rules, in order:
//! 1. `Duplicate` → [`Decision::Ack`] (already done; count it, never retry).
//! 2. reason in `discard_on` → [`Decision::Discard`].
//! 3. reason in `park_on`, or a permanent class → [`Decision::Park`] on the
//!    first failure.
//! 4. `max_age` spent → the `on_exhausted` action.
//! 5. in-process tries left → [`Decision::RetryLocal`] with the local backoff.
//! 6. `max_attempts` reached, or `max_total_delay` spent → `on_exhausted`.
//! 7. otherwise the next backoff delay (clamped to what is left of
//!    `max_total_delay`) → [`Decision::Pause`] in ordered mode, else
//!    [`Decision::RetryLater`].

use std::time::{Duration, SystemTime};

use crate::{
    envelope::RetryState,
    failure::{Classified, FailureClass, Reason},
    policy::{OnExhausted, Ordering, RetryPolicy},
};

/// What to do with a failed delivery. Transports carry it out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Acknowledge: the work is already done (a duplicate).
    Ack,
    /// Try again in process after the delay, holding the delivery.
    RetryLocal(Duration),
    /// Hand a copy with the updated envelope to the broker to deliver again
    /// after the delay, then acknowledge the original.
    RetryLater(Duration),
    /// Ordered mode: hold the delivery and everything behind it, retry in
    /// place after the delay.
    Pause(Duration),
    /// Move to the parking lot with the envelope, then acknowledge.
    Park(Reason),
    /// Acknowledge and count, without retrying or parking.
    Discard(Reason),
    /// Stop consuming; leave the delivery unacknowledged.
    Halt(Reason),
}

impl Decision {
    /// The delay, for the decisions that wait.
    pub fn delay(&self) -> Option<Duration> {
        match self {
            Decision::RetryLocal(d) | Decision::RetryLater(d) | Decision::Pause(d) => Some(*d),
            _ => None,
        }
    }

    /// A short name for logs and metric labels.
    pub const fn name(&self) -> &'static str {
        match self {
            Decision::Ack => "ack",
            Decision::RetryLocal(_) => "retry-local",
            Decision::RetryLater(_) => "retry-later",
            Decision::Pause(_) => "pause",
            Decision::Park(_) => "park",
            Decision::Discard(_) => "discard",
            Decision::Halt(_) => "halt",
        }
    }
}

/// Decides what happens to a delivery whose current attempt just failed.
///
/// `state` is the reconciled retry state *before* this failure is counted;
/// `roll` is one draw of the injected dice (used only when jitter applies).
/// Pure and allocation-free.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use parkway_core::{decide, Backoff, Classified, Decision, FailureClass, RetryPolicy, RetryState};
/// let policy = RetryPolicy::builder()
///     .backoff(Backoff::fixed(Duration::from_secs(2)))
///     .park_on(["DESERIALIZATION_FAILED"])
///     .build()
///     .unwrap();
/// let now = SystemTime::now();
/// let timeout = Classified::new(FailureClass::Transient, "DOWNSTREAM_TIMEOUT");
/// assert_eq!(decide(&policy, &RetryState::default(), &timeout, now, 0),
///            Decision::RetryLater(Duration::from_secs(2)));
/// let bad_json = Classified::new(FailureClass::Unknown, "DESERIALIZATION_FAILED");
/// assert!(matches!(decide(&policy, &RetryState::default(), &bad_json, now, 0), Decision::Park(_)));
/// ```
pub fn decide(
    policy: &RetryPolicy,
    state: &RetryState,
    failure: &Classified,
    now: SystemTime,
    roll: u64,
) -> Decision {
    let reason = &failure.reason;
    if failure.class == FailureClass::Duplicate {
        return Decision::Ack;
    }
    if policy.discards(reason) {
        return Decision::Discard(reason.clone());
    }
    if policy.parks(reason) || failure.class.is_permanent() {
        return Decision::Park(reason.clone());
    }
    if policy.max_age.is_some_and(|max| state.age(now) >= max) {
        return exhausted(policy, reason);
    }
    if state.local_attempt < policy.local_attempts {
        let d = policy.local_backoff.delay(state.local_attempt, None, roll);
        return Decision::RetryLocal(d);
    }
    // This failure is attempt `attempts + 1`.
    if state.attempts.saturating_add(1) >= policy.max_attempts {
        return exhausted(policy, reason);
    }
    let left = policy
        .max_total_delay
        .map(|max| max.saturating_sub(state.total_delay));
    if left.is_some_and(|l| l.is_zero()) {
        return exhausted(policy, reason);
    }
    let next = state.attempts.saturating_add(1);
    let delay = policy.backoff.delay(next, state.last_delay, roll);
    let delay = left.map_or(delay, |l| delay.min(l));
    match policy.ordering {
        Ordering::Ordered => Decision::Pause(delay),
        Ordering::Unordered => Decision::RetryLater(delay),
    }
}

fn exhausted(policy: &RetryPolicy, reason: &Reason) -> Decision {
    match policy.on_exhausted {
        OnExhausted::Park => Decision::Park(reason.clone()),
        OnExhausted::Discard => Decision::Discard(reason.clone()),
        OnExhausted::Halt => Decision::Halt(reason.clone()),
    }
}

#[cfg(test)]
mod tests;
