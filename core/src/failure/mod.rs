//! What went wrong, and what kind of wrong it is.
//!
//! A handler returns a [`Failure`]: a stable reason code for grouping and
//! policy (`DOWNSTREAM_TIMEOUT`), optionally the handler's own idea of the
//! [`FailureClass`], and the source error for the logs. The class decides the
//! lifecycle: transient failures are retried, permanent ones parked at once,
//! duplicates acknowledged. Classification is a pure step ([`Classifier`]) so
//! it can be unit-tested and reconfigured without touching handler code.

mod class;
mod classifier;
mod reason;

pub use class::{FailureClass, InvalidClass};
pub use classifier::{Classified, Classifier, RuleClassifier};
pub use reason::{InvalidReason, MAX_REASON_LEN, Reason};

use std::{error::Error as StdError, fmt};

/// A handler's failure: reason code, optional class, source error.
///
/// ```
/// use parkway_core::{Failure, FailureClass};
/// let f = Failure::new("DOWNSTREAM_TIMEOUT").with_class(FailureClass::Transient);
/// assert_eq!(f.reason().as_str(), "DOWNSTREAM_TIMEOUT");
/// assert!(f.is_retryable());
/// ```
pub struct Failure {
    reason: Reason,
    class: Option<FailureClass>,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl Failure {
    /// A failure with a reason code and no source error. An invalid code is
    /// made valid (see [`Reason::sanitized`]) so that it survives the
    /// envelope codec.
    pub fn new(reason: impl Into<Reason>) -> Self {
        Failure {
            reason: reason.into().sanitized(),
            class: None,
            source: None,
        }
    }

    /// A transient failure (a timeout, a 503): retried within the budget.
    pub fn transient(reason: impl Into<Reason>) -> Self {
        Failure::new(reason).with_class(FailureClass::Transient)
    }

    /// A permanent business failure (an illegal state transition): parked.
    pub fn business(reason: impl Into<Reason>) -> Self {
        Failure::new(reason).with_class(FailureClass::PermanentBusiness)
    }

    /// A permanent technical failure (malformed payload): parked.
    pub fn permanent(reason: impl Into<Reason>) -> Self {
        Failure::new(reason).with_class(FailureClass::PermanentTechnical)
    }

    /// Sets the handler's own classification.
    #[must_use]
    pub fn with_class(mut self, class: FailureClass) -> Self {
        self.class = Some(class);
        self
    }

    /// Attaches the underlying error (kept for logs and the parked envelope).
    #[must_use]
    pub fn with_source(mut self, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The reason code.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }

    /// The handler's own classification, if it gave one.
    pub fn class(&self) -> Option<FailureClass> {
        self.class
    }

    /// Whether the handler's own class (or its absence) suggests a retry.
    /// The configured [`Classifier`] has the final word.
    pub fn is_retryable(&self) -> bool {
        self.class.is_none_or(FailureClass::is_retryable)
    }

    /// The source error's message chain, one line, for the envelope's
    /// `last-error` field (it is bounded there, not here).
    pub fn describe(&self) -> String {
        let mut out = self.reason.to_string();
        let mut next: Option<&(dyn StdError + 'static)> = match &self.source {
            Some(e) => Some(e.as_ref()),
            None => None,
        };
        while let Some(err) = next {
            out.push_str(": ");
            out.push_str(&err.to_string());
            next = err.source();
        }
        out
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failure")
            .field("reason", &self.reason)
            .field("class", &self.class)
            .field("source", &self.source.as_ref().map(|s| s.to_string()))
            .finish()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl StdError for Failure {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.source {
            Some(e) => Some(e.as_ref()),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_walks_the_source_chain() {
        let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "read timed out");
        let f = Failure::transient("DOWNSTREAM_TIMEOUT").with_source(io);
        assert_eq!(f.describe(), "DOWNSTREAM_TIMEOUT: read timed out");
        assert_eq!(f.class(), Some(FailureClass::Transient));
    }
}
