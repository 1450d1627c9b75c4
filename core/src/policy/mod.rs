//! The retry budget of one route: how often, how long, and what then.
//!
//! Why so many limits and not just "max retries"? Because each one bounds a
//! different harm: `max_attempts` the load on a dependency, `max_age` the
//! staleness of the work, `max_total_delay` the time a message can sit in
//! wait queues, `local_attempts` the in-process blips that need no broker
//! round-trip. `park_on` and `discard_on` name the reasons that should not
//! spend any budget at all.

mod builder;

pub use builder::{LOCAL_ATTEMPTS_LIMIT, MAX_ATTEMPTS_LIMIT, RetryPolicyBuilder};

use std::{fmt, str::FromStr, time::Duration};

use crate::{backoff::Backoff, failure::Reason};

/// What happens when the budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnExhausted {
    /// Move the message to the parking lot (the default).
    #[default]
    Park,
    /// Acknowledge and count it.
    Discard,
    /// Stop consuming with an error, leaving the message unacknowledged.
    Halt,
}

/// Whether retries may reorder messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Ordering {
    /// Retries go to the back (wait queue, retry topic); others overtake.
    #[default]
    Unordered,
    /// Retry in place: nothing behind a failing message (same partition,
    /// group or key) is processed until it succeeds or leaves.
    Ordered,
}

macro_rules! kebab_enum {
    ($ty:ident { $($variant:ident = $name:literal),+ }) => {
        impl $ty {
            /// The config spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $name),+ }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    _ => Err(format!(
                        "unknown value {:?}: expected {}",
                        s.chars().take(40).collect::<String>(),
                        [$($name),+].join(" or ")
                    )),
                }
            }
        }
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

kebab_enum!(OnExhausted { Park = "park", Discard = "discard", Halt = "halt" });
kebab_enum!(Ordering { Unordered = "unordered", Ordered = "ordered" });

/// A policy that cannot work as written; names the field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct InvalidPolicy {
    field: &'static str,
    why: String,
}

impl InvalidPolicy {
    pub(crate) fn new(field: &'static str, why: impl Into<String>) -> Self {
        InvalidPolicy {
            field,
            why: why.into(),
        }
    }

    /// The offending field, as spelled in config.
    pub fn field(&self) -> &'static str {
        self.field
    }
}

/// A validated retry policy. Build one with [`RetryPolicy::builder`].
///
/// ```
/// use std::time::Duration;
/// use parkway_core::{Backoff, RetryPolicy};
/// let p = RetryPolicy::builder()
///     .max_attempts(5)
///     .max_age(Duration::from_secs(7200))
///     .backoff(Backoff::fixed(Duration::from_secs(1)))
///     .park_on(["DESERIALIZATION_FAILED"])
///     .build()
///     .unwrap();
/// assert_eq!(p.max_attempts(), 5);
/// assert!(RetryPolicy::builder().max_attempts(0).build().is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub(crate) local_attempts: u32,
    pub(crate) local_backoff: Backoff,
    pub(crate) max_attempts: u32,
    pub(crate) max_age: Option<Duration>,
    pub(crate) max_total_delay: Option<Duration>,
    pub(crate) backoff: Backoff,
    /// Sorted, for allocation-free lookup.
    pub(crate) park_on: Vec<Reason>,
    /// Sorted, for allocation-free lookup.
    pub(crate) discard_on: Vec<Reason>,
    pub(crate) on_exhausted: OnExhausted,
    pub(crate) ordering: Ordering,
}

impl Default for RetryPolicy {
    /// Five attempts, exponential backoff from 1 s ×2 capped at 5 min with
    /// full jitter, park when spent.
    fn default() -> Self {
        RetryPolicyBuilder::default().into_policy()
    }
}

impl RetryPolicy {
    /// Starts from the defaults.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder::default()
    }

    /// In-process tries per delivery (1 = no local retry).
    pub fn local_attempts(&self) -> u32 {
        self.local_attempts
    }
    /// Backoff between local tries.
    pub fn local_backoff(&self) -> &Backoff {
        &self.local_backoff
    }
    /// Broker-level attempts before the budget is spent.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }
    /// Longest time since the first failure.
    pub fn max_age(&self) -> Option<Duration> {
        self.max_age
    }
    /// Longest sum of delays.
    pub fn max_total_delay(&self) -> Option<Duration> {
        self.max_total_delay
    }
    /// Backoff between broker-level attempts.
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }
    /// Reasons parked on the first failure.
    pub fn park_on(&self) -> &[Reason] {
        &self.park_on
    }
    /// Reasons acknowledged and counted.
    pub fn discard_on(&self) -> &[Reason] {
        &self.discard_on
    }
    /// What happens when the budget is spent.
    pub fn on_exhausted(&self) -> OnExhausted {
        self.on_exhausted
    }
    /// Ordered or unordered retries.
    pub fn ordering(&self) -> Ordering {
        self.ordering
    }

    /// The longest single delay this policy can ask a transport to hold.
    pub fn longest_delay(&self) -> Duration {
        // Retries follow failures 1 ..= max_attempts − 1; the last attempt's
        // failure spends the budget instead of waiting.
        let retries = self.max_attempts.saturating_sub(1).max(1);
        let d = self.backoff.longest(retries);
        self.max_total_delay.map_or(d, |t| d.min(t))
    }

    pub(crate) fn parks(&self, reason: &Reason) -> bool {
        self.park_on.binary_search(reason).is_ok()
    }

    pub(crate) fn discards(&self, reason: &Reason) -> bool {
        self.discard_on.binary_search(reason).is_ok()
    }
}
