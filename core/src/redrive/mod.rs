//! Redrive: moving parked messages back, as a controlled operation.
//!
//! Replay is not "move everything back". An operator selects what to move
//! ([`Filter`]), can look first (dry run), bounds it (limit, rate), tries a
//! few before the rest (canary: abort if they fail again), and leaves a
//! trail (replay headers on every moved message, an audit log line and a
//! [`RedriveReport`]). Transports only move one message at a time when
//! asked ([`crate::ParkingLot::sweep`]); all of the above is written once,
//! here.

mod filter;
mod options;
mod run;

pub use filter::Filter;
pub use options::{Canary, InvalidRedrive, RedriveOptions, ReplayRequest};
pub use run::redrive;

use std::fmt;

/// What a redrive run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedriveReport {
    /// The replay id written to moved messages.
    pub replay_id: String,
    /// Whether this was a dry run (nothing moved).
    pub dry_run: bool,
    /// Parked messages examined.
    pub scanned: usize,
    /// Messages the filter selected.
    pub matched: usize,
    /// Messages moved back (durably accepted at their origin).
    pub moved: usize,
    /// Selected messages still parked (limit, abort, failures, dry run).
    pub left: usize,
    /// Moves the transport could not complete (the message stays parked).
    pub failed: usize,
    /// Canary messages that were parked again during the canary wait.
    pub failed_again: usize,
    /// Why the run stopped early, if it did.
    pub aborted: Option<String>,
}

impl RedriveReport {
    /// Whether the run did all it was asked without failures.
    pub fn is_clean(&self) -> bool {
        self.failed == 0 && self.aborted.is_none()
    }
}

impl fmt::Display for RedriveReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}: scanned {}, matched {}, moved {}, left {}, failed {}",
            self.replay_id,
            if self.dry_run { " (dry run)" } else { "" },
            self.scanned,
            self.matched,
            self.moved,
            self.left,
            self.failed
        )?;
        if self.failed_again > 0 {
            write!(f, ", failed again {}", self.failed_again)?;
        }
        if let Some(why) = &self.aborted {
            write!(f, "; aborted: {why}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
