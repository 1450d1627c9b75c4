//! Transport errors that say what the caller can do about them.

use std::{error::Error as StdError, fmt};

/// What kind of transport failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The connection or channel is gone; reconnecting may help.
    Disconnected,
    /// The broker refused the operation (nack, no route, throttled).
    Refused,
    /// No answer in time; the outcome is unknown.
    Timeout,
    /// The transport was closed by its owner.
    Closed,
    /// The broker's topology is missing or differs from the plan.
    Topology,
    /// The transport cannot do this by design (see its capabilities).
    Unsupported,
    /// Bad settings given to the transport.
    Config,
}

/// A failure of a transport operation.
#[derive(Debug, thiserror::Error)]
#[error("{transport} transport: {kind}: {detail}")]
pub struct TransportError {
    transport: &'static str,
    kind: ErrorKind,
    detail: String,
    #[source]
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl TransportError {
    /// An error of `kind` from `transport`, with a human-readable detail.
    pub fn new(transport: &'static str, kind: ErrorKind, detail: impl Into<String>) -> Self {
        TransportError {
            transport,
            kind,
            detail: detail.into(),
            source: None,
        }
    }

    /// A delivery that another transport made (its token is not this
    /// one's): there is nothing here to settle it with.
    pub fn foreign_delivery(transport: &'static str) -> Self {
        Self::new(
            transport,
            ErrorKind::Config,
            "delivery is not from this transport",
        )
    }

    /// Attaches the underlying client error.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Which transport failed.
    pub fn transport(&self) -> &'static str {
        self.transport
    }

    /// Whether trying the same operation again later can succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Disconnected | ErrorKind::Refused | ErrorKind::Timeout
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Disconnected => "disconnected",
            ErrorKind::Refused => "refused by the broker",
            ErrorKind::Timeout => "timed out",
            ErrorKind::Closed => "closed",
            ErrorKind::Topology => "topology",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Config => "configuration",
        })
    }
}
