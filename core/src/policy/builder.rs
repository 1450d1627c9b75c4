//! Building a [`RetryPolicy`] step by step, validated once at the end.

use std::time::Duration;

use super::{InvalidPolicy, OnExhausted, Ordering, RetryPolicy};
use crate::{
    backoff::{Backoff, Jitter, Strategy},
    failure::Reason,
};

/// Most broker-level attempts a policy may allow.
pub const MAX_ATTEMPTS_LIMIT: u32 = 10_000;
/// Most in-process tries per delivery.
pub const LOCAL_ATTEMPTS_LIMIT: u32 = 100;

/// Builder for [`RetryPolicy`]; [`RetryPolicyBuilder::build`] validates.
#[derive(Debug, Clone)]
pub struct RetryPolicyBuilder {
    policy: RetryPolicy,
}

impl Default for RetryPolicyBuilder {
    fn default() -> Self {
        let backoff = Backoff::new(
            Strategy::Exponential {
                initial: Duration::from_secs(1),
                multiplier: 2.0,
            },
            Jitter::Full,
            Some(Duration::from_secs(300)),
        )
        // The literal above is valid; fall back to a fixed delay rather than
        // panic should the rules ever change under it.
        .unwrap_or_else(|_| Backoff::fixed(Duration::from_secs(1)));
        RetryPolicyBuilder {
            policy: RetryPolicy {
                local_attempts: 1,
                local_backoff: Backoff::fixed(Duration::from_millis(100)),
                max_attempts: 5,
                max_age: None,
                max_total_delay: None,
                backoff,
                park_on: Vec::new(),
                discard_on: Vec::new(),
                on_exhausted: OnExhausted::Park,
                ordering: Ordering::Unordered,
            },
        }
    }
}

impl RetryPolicyBuilder {
    /// In-process tries per delivery, including the first (1 = none).
    #[must_use]
    pub fn local_attempts(mut self, n: u32) -> Self {
        self.policy.local_attempts = n;
        self
    }
    /// Backoff between in-process tries (keep it sub-second).
    #[must_use]
    pub fn local_backoff(mut self, b: Backoff) -> Self {
        self.policy.local_backoff = b;
        self
    }
    /// Broker-level attempts, including the first delivery.
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.policy.max_attempts = n;
        self
    }
    /// Longest time since the first failure before the budget is spent.
    #[must_use]
    pub fn max_age(mut self, d: Duration) -> Self {
        self.policy.max_age = Some(d);
        self
    }
    /// Longest sum of all delays.
    #[must_use]
    pub fn max_total_delay(mut self, d: Duration) -> Self {
        self.policy.max_total_delay = Some(d);
        self
    }
    /// Backoff between broker-level attempts.
    #[must_use]
    pub fn backoff(mut self, b: Backoff) -> Self {
        self.policy.backoff = b;
        self
    }
    /// Reasons parked on the first failure.
    #[must_use]
    pub fn park_on<R: Into<Reason>>(mut self, reasons: impl IntoIterator<Item = R>) -> Self {
        self.policy.park_on = reasons.into_iter().map(Into::into).collect();
        self
    }
    /// Reasons acknowledged and counted, never retried or parked.
    #[must_use]
    pub fn discard_on<R: Into<Reason>>(mut self, reasons: impl IntoIterator<Item = R>) -> Self {
        self.policy.discard_on = reasons.into_iter().map(Into::into).collect();
        self
    }
    /// What happens when the budget is spent.
    #[must_use]
    pub fn on_exhausted(mut self, o: OnExhausted) -> Self {
        self.policy.on_exhausted = o;
        self
    }
    /// Ordered (retry in place) or unordered.
    #[must_use]
    pub fn ordering(mut self, o: Ordering) -> Self {
        self.policy.ordering = o;
        self
    }

    /// Validates and returns the policy.
    pub fn build(self) -> Result<RetryPolicy, InvalidPolicy> {
        let p = &self.policy;
        if !(1..=MAX_ATTEMPTS_LIMIT).contains(&p.max_attempts) {
            return Err(InvalidPolicy::new(
                "max_attempts",
                format!(
                    "is {}; it must be between 1 and {MAX_ATTEMPTS_LIMIT}",
                    p.max_attempts
                ),
            ));
        }
        if !(1..=LOCAL_ATTEMPTS_LIMIT).contains(&p.local_attempts) {
            return Err(InvalidPolicy::new(
                "local_attempts",
                format!(
                    "is {}; it must be between 1 and {LOCAL_ATTEMPTS_LIMIT}",
                    p.local_attempts
                ),
            ));
        }
        if p.max_age.is_some_and(|d| d.is_zero()) {
            return Err(InvalidPolicy::new("max_age", "must be greater than zero"));
        }
        if p.max_total_delay.is_some_and(|d| d.is_zero()) {
            return Err(InvalidPolicy::new(
                "max_total_delay",
                "must be greater than zero",
            ));
        }
        if let Some(r) = p.park_on.iter().find(|r| p.discard_on.contains(r)) {
            return Err(InvalidPolicy::new(
                "discard_on",
                format!("reason {r} is also in park_on; a reason can only do one"),
            ));
        }
        Ok(self.into_policy())
    }

    pub(crate) fn into_policy(mut self) -> RetryPolicy {
        self.policy.park_on.sort();
        self.policy.park_on.dedup();
        self.policy.discard_on.sort();
        self.policy.discard_on.dedup();
        self.policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_field() {
        let e = |b: RetryPolicyBuilder| b.build().unwrap_err().field();
        assert_eq!(e(RetryPolicy::builder().max_attempts(0)), "max_attempts");
        assert_eq!(
            e(RetryPolicy::builder().local_attempts(0)),
            "local_attempts"
        );
        assert_eq!(e(RetryPolicy::builder().max_age(Duration::ZERO)), "max_age");
        assert_eq!(
            e(RetryPolicy::builder().max_total_delay(Duration::ZERO)),
            "max_total_delay"
        );
        assert_eq!(
            e(RetryPolicy::builder().park_on(["A"]).discard_on(["A"])),
            "discard_on"
        );
    }

    #[test]
    fn reason_lists_are_sorted_for_lookup() {
        let p = RetryPolicy::builder()
            .park_on(["Z", "A", "M", "A"])
            .build()
            .unwrap();
        assert_eq!(p.park_on().len(), 3);
        assert!(p.parks(&Reason::from_static("M")));
        assert!(!p.parks(&Reason::from_static("B")));
    }
}
