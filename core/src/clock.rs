//! The injected wall clock.
//!
//! Envelopes carry wall-clock times (first failure, last failure) because
//! they outlive the process; the rules compare them with "now". Tests need
//! "now" to move with `tokio::time::pause`/`advance`, so the worker reads it
//! from a [`Clock`] instead of `SystemTime::now()`.

use std::{fmt, time::SystemTime};

/// A source of wall-clock time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// Wall-clock time that advances with tokio's clock, so a paused test
/// runtime also pauses it. Anchored to the real time when created.
///
/// ```
/// use parkway_core::{Clock, TokioClock};
/// let clock = TokioClock::new();
/// assert!(clock.now() >= std::time::UNIX_EPOCH);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    wall: SystemTime,
    mono: tokio::time::Instant,
}

impl TokioClock {
    /// A clock anchored at the current real time.
    pub fn new() -> Self {
        TokioClock::starting_at(SystemTime::now())
    }

    /// A clock that reads `start` now and advances with tokio's clock.
    pub fn starting_at(start: SystemTime) -> Self {
        TokioClock {
            wall: start,
            mono: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> SystemTime {
        self.wall + self.mono.elapsed()
    }
}

/// The operating system's clock, unaffected by tokio's test clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

impl fmt::Display for TokioClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_rfc3339_millis(self.now()))
    }
}
