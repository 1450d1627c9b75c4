//! How a redrive runs: dry run, limit, rate, canary, and who asked.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A redrive option that cannot work; names the option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid redrive option {option}: {why}")]
pub struct InvalidRedrive {
    option: &'static str,
    why: &'static str,
}

/// Move the first `count` messages, wait, and abort if more than
/// `max_failure_percent` of them were parked again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Canary {
    pub(crate) count: usize,
    pub(crate) wait: Duration,
    pub(crate) max_failure_percent: f64,
}

impl Canary {
    /// Validates a canary: `count ≥ 1`, `0 ≤ max_failure_percent ≤ 100`.
    pub fn new(
        count: usize,
        wait: Duration,
        max_failure_percent: f64,
    ) -> Result<Self, InvalidRedrive> {
        if count == 0 {
            return Err(InvalidRedrive {
                option: "canary",
                why: "must move at least one message",
            });
        }
        if !(0.0..=100.0).contains(&max_failure_percent) {
            return Err(InvalidRedrive {
                option: "canary max failure",
                why: "must be a percentage between 0 and 100",
            });
        }
        Ok(Canary {
            count,
            wait,
            max_failure_percent,
        })
    }
}

/// Options of one redrive run.
///
/// ```
/// use std::time::Duration;
/// use parkway_core::redrive::{Canary, RedriveOptions};
/// let o = RedriveOptions::default()
///     .limit(100)
///     .rate(20.0).unwrap()
///     .canary(Canary::new(5, Duration::from_secs(30), 20.0).unwrap());
/// assert!(RedriveOptions::default().rate(0.0).is_err());
/// # let _ = o;
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RedriveOptions {
    pub(crate) dry_run: bool,
    pub(crate) limit: Option<usize>,
    pub(crate) rate: Option<f64>,
    pub(crate) canary: Option<Canary>,
}

impl RedriveOptions {
    /// Count what would move; move nothing.
    #[must_use]
    pub fn dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }

    /// Move at most `n` messages.
    #[must_use]
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// Move at most `per_second` messages a second (> 0).
    pub fn rate(mut self, per_second: f64) -> Result<Self, InvalidRedrive> {
        if !(per_second.is_finite() && per_second > 0.0) {
            return Err(InvalidRedrive {
                option: "rate",
                why: "must be a positive number of messages per second",
            });
        }
        self.rate = Some(per_second);
        Ok(self)
    }

    /// Canary first.
    #[must_use]
    pub fn canary(mut self, canary: Canary) -> Self {
        self.canary = Some(canary);
        self
    }
}

/// Who replays, and why; becomes the replay headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayRequest {
    pub(crate) id: String,
    pub(crate) by: String,
    pub(crate) reason: String,
}

impl ReplayRequest {
    /// A replay by `operator` for `reason` (both required), with a fresh id.
    pub fn new(operator: &str, reason: &str) -> Result<Self, InvalidRedrive> {
        if operator.trim().is_empty() {
            return Err(InvalidRedrive {
                option: "operator",
                why: "must name who runs the redrive",
            });
        }
        if reason.trim().is_empty() {
            return Err(InvalidRedrive {
                option: "reason",
                why: "must say why the messages are replayed",
            });
        }
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        Ok(ReplayRequest {
            id: format!("replay-{ms}-{:04x}", fastrand::u16(..)),
            by: operator.trim().to_owned(),
            reason: reason.trim().to_owned(),
        })
    }

    /// Uses a given replay id instead of a generated one.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// The replay id written to every moved message.
    pub fn id(&self) -> &str {
        &self.id
    }
}
