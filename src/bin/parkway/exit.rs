//! Exit codes scripts can trust, and the error that carries one.
//!
//! Why codes per cause? A script that redrives at night must tell "fix the
//! config" (1) from "the broker is down, try later" (2) from "the canary
//! failed, look at the handler" (3) and "some moves failed" (4).

use std::fmt;

use parkway::{ConnectError, ErrorKind, TransportError};

/// Done.
pub(crate) const OK: u8 = 0;
/// Usage or config error.
pub(crate) const USAGE: u8 = 1;
/// Broker error.
pub(crate) const BROKER: u8 = 2;
/// Redrive aborted by its canary.
pub(crate) const CANARY: u8 = 3;
/// Redrive finished with failed moves.
pub(crate) const PARTIAL: u8 = 4;

/// A command's failure: what to print, and the exit code.
#[derive(Debug)]
pub(crate) struct CliError {
    code: u8,
    message: String,
}

impl CliError {
    /// A usage or config problem.
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        CliError {
            code: USAGE,
            message: message.into(),
        }
    }

    /// A broker problem.
    pub(crate) fn broker(message: impl Into<String>) -> Self {
        CliError {
            code: BROKER,
            message: message.into(),
        }
    }

    /// A transport error: a config error (1) or a broker error (2).
    pub(crate) fn transport(doing: &str, e: &TransportError) -> Self {
        let message = format!("{doing}: {}", chain(e));
        if e.kind() == ErrorKind::Config {
            CliError::usage(message)
        } else {
            CliError::broker(message)
        }
    }

    /// A connect error: settings and missing features are config errors.
    pub(crate) fn connect(doing: &str, e: &ConnectError) -> Self {
        match e {
            ConnectError::Transport(t) => CliError::transport(doing, t),
            other => CliError::usage(format!("{doing}: {other}")),
        }
    }

    /// The exit code.
    pub(crate) fn code(&self) -> u8 {
        self.code
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// An error and its sources, one line.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
