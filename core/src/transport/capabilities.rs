//! What a transport can do, and the start-up check of policies against it.
//!
//! Why check at start-up? A 2 h backoff on a transport that holds at most
//! 15 min fails only when the first message reaches that step, perhaps weeks
//! after the deploy. Comparing each policy with the transport's stated limits
//! when the worker starts turns that into an error with the policy's name.

use std::{fmt, time::Duration};

use crate::policy::{Ordering, RetryPolicy};

/// How a transport holds delays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DelayMode {
    /// Any delay, to within `granularity` (timers, visibility timeouts).
    Exact {
        /// Smallest distinguishable step.
        granularity: Duration,
    },
    /// Delays are rounded to a fixed set of tiers (wait queues, tier topics);
    /// the transport reports its tier plan separately.
    Tiered {
        /// Worst-case relative rounding error, in percent.
        max_error_percent: u32,
    },
}

/// A transport's statement of what it supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Longest single delay it can hold (`None` = no limit).
    pub max_delay: Option<Duration>,
    /// Exact or tiered delays.
    pub delay_mode: DelayMode,
    /// Whether it can keep order per lane (retry in place).
    pub ordered: bool,
    /// Whether the broker can move parked messages back by itself.
    pub native_redrive: bool,
    /// Whether a halted delivery can stop just its own lane (a Kafka
    /// partition) and wait there for an operator, instead of stopping the
    /// whole worker.
    pub halts_in_place: bool,
}

/// A policy the transport cannot carry out, with both sides named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A delay longer than the transport holds.
    #[error(
        "policy `{policy}` can wait {longest} before a retry, but the {transport} transport holds at most {limit}; lower backoff.max or max_total_delay"
    )]
    DelayTooLong {
        /// Policy name.
        policy: String,
        /// Transport kind.
        transport: String,
        /// The policy's longest delay, human-readable.
        longest: String,
        /// The transport's limit, human-readable.
        limit: String,
    },
    /// Ordered mode on a transport that cannot keep order.
    #[error(
        "policy `{policy}` asks for ordered mode, which the {transport} transport does not support"
    )]
    OrderingUnsupported {
        /// Policy name.
        policy: String,
        /// Transport kind.
        transport: String,
    },
}

/// What a policy will get from a transport, for the start-up report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyPlan {
    /// Policy name.
    pub policy: String,
    /// The longest single delay the policy can ask for.
    pub longest_delay: Duration,
    /// The delay precision the transport offers.
    pub delay_mode: DelayMode,
}

impl fmt::Display for PolicyPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "policy `{}`: longest delay {}, ",
            self.policy,
            humantime::format_duration(self.longest_delay)
        )?;
        match self.delay_mode {
            DelayMode::Exact { granularity } => {
                write!(f, "exact to {}", humantime::format_duration(granularity))
            }
            DelayMode::Tiered { max_error_percent } => {
                write!(f, "tiered, within {max_error_percent}%")
            }
        }
    }
}

impl Capabilities {
    /// Checks one policy; `transport` and `policy` name both sides in errors.
    ///
    /// ```
    /// use std::time::Duration;
    /// use parkway_core::{Backoff, Capabilities, DelayMode, RetryPolicy};
    /// let caps = Capabilities {
    ///     max_delay: Some(Duration::from_secs(900)),
    ///     delay_mode: DelayMode::Exact { granularity: Duration::from_secs(1) },
    ///     ordered: false,
    ///     native_redrive: true,
    ///     halts_in_place: false,
    /// };
    /// let slow = RetryPolicy::builder().backoff(Backoff::fixed(Duration::from_secs(7200))).build().unwrap();
    /// let err = caps.check("sqs", "sync-crm", &slow).unwrap_err();
    /// assert!(err.to_string().contains("sync-crm"));
    /// ```
    pub fn check(
        &self,
        transport: &str,
        policy_name: &str,
        policy: &RetryPolicy,
    ) -> Result<PolicyPlan, PlanError> {
        if policy.ordering() == Ordering::Ordered && !self.ordered {
            return Err(PlanError::OrderingUnsupported {
                policy: policy_name.to_owned(),
                transport: transport.to_owned(),
            });
        }
        // Only broker-level retries need the transport to hold a delay.
        let longest = if policy.max_attempts() > 1 {
            policy.longest_delay()
        } else {
            Duration::ZERO
        };
        if let Some(limit) = self.max_delay {
            if longest > limit {
                return Err(PlanError::DelayTooLong {
                    policy: policy_name.to_owned(),
                    transport: transport.to_owned(),
                    longest: humantime::format_duration(longest).to_string(),
                    limit: humantime::format_duration(limit).to_string(),
                });
            }
        }
        Ok(PolicyPlan {
            policy: policy_name.to_owned(),
            longest_delay: longest,
            delay_mode: self.delay_mode,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backoff, policy::Ordering};

    fn caps(ordered: bool, max: Option<u64>) -> Capabilities {
        Capabilities {
            max_delay: max.map(Duration::from_secs),
            delay_mode: DelayMode::Exact {
                granularity: Duration::from_millis(1),
            },
            ordered,
            native_redrive: false,
            halts_in_place: false,
        }
    }

    #[test]
    fn ordered_policy_needs_an_ordered_transport() {
        let p = RetryPolicy::builder()
            .ordering(Ordering::Ordered)
            .build()
            .unwrap();
        let e = caps(false, None).check("sqs", "ledger", &p).unwrap_err();
        assert!(
            e.to_string().contains("`ledger`") && e.to_string().contains("sqs"),
            "{e}"
        );
        assert!(caps(true, None).check("memory", "ledger", &p).is_ok());
    }

    #[test]
    fn longest_delay_is_checked_against_the_limit() {
        let p = RetryPolicy::builder()
            .max_attempts(3)
            .backoff(Backoff::fixed(Duration::from_secs(3600)))
            .build()
            .unwrap();
        let e = caps(true, Some(900)).check("sqs", "crm", &p).unwrap_err();
        assert!(
            e.to_string().contains("1h") && e.to_string().contains("15m"),
            "{e}"
        );
        let plan = caps(true, Some(7200)).check("sqs", "crm", &p).unwrap();
        assert_eq!(plan.longest_delay, Duration::from_secs(3600));
        // One attempt never asks the transport to hold anything.
        let once = RetryPolicy::builder()
            .max_attempts(1)
            .backoff(Backoff::fixed(Duration::from_secs(3600)))
            .build()
            .unwrap();
        assert!(caps(true, Some(1)).check("sqs", "crm", &once).is_ok());
    }
}
