//! The config file: one TOML file selects the transport and holds the
//! policies.
//!
//! Swapping the broker changes the `[transport]` table only; the same
//! `[policies]` then mean the same attempts, delays, parking and redrive on
//! every broker. Durations are human-readable (`"30s"`, `"2h"`). A bad file
//! is refused with an error naming the field (`policies.orders.backoff.max:
//! …`), never half-loaded and never a panic.
//!
//! ```
//! use parkway_core::config::Config;
//! let config = Config::from_toml(r#"
//!     [transport]
//!     kind = "memory"
//!
//!     [policies.create-order]
//!     local_attempts = 2
//!     max_attempts = 5
//!     max_age = "2h"
//!     backoff = { kind = "exponential", initial = "1s", multiplier = 2.0, max = "30m", jitter = "full" }
//!     park_on = ["DESERIALIZATION_FAILED", "UNSUPPORTED_SCHEMA_VERSION"]
//! "#).unwrap();
//! assert_eq!(config.router.route("orders").name, "create-order");
//! let err = Config::from_toml("[transport]\nkind = \"memory\"\n[policies.p]\nmax_attempts = -1\n").unwrap_err();
//! assert!(err.to_string().contains("policies.p.max_attempts"), "{err}");
//! ```

mod compile;
mod raw;

use std::{path::Path, time::Duration};

use crate::{envelope::EnvelopeLimits, failure::RuleClassifier, worker::Router};

/// The transport table: its kind, and the rest for that transport to read.
#[derive(Debug, Clone, PartialEq)]
pub struct TransportConfig {
    /// `memory`, `rabbitmq`, `kafka`, `sqs`.
    pub kind: String,
    /// The table's other keys, for the transport to deserialize.
    pub settings: toml::Table,
}

impl TransportConfig {
    /// Reads `settings` into a transport's own settings type; an error names
    /// the field as `transport.<field>` and is reported as the transport
    /// `kind`'s configuration error.
    ///
    /// ```
    /// #[derive(serde::Deserialize)]
    /// struct S { queue: String }
    /// let t: toml::Table = toml::from_str("queue = 3").unwrap();
    /// let e = parkway_core::config::TransportConfig::parse_settings::<S>("demo", &t).err().unwrap();
    /// assert!(e.to_string().contains("transport.queue"));
    /// let t: toml::Table = toml::from_str("queue = \"orders\"").unwrap();
    /// let s: S = parkway_core::config::TransportConfig::parse_settings("demo", &t).unwrap();
    /// assert_eq!(s.queue, "orders");
    /// ```
    pub fn parse_settings<T: serde::de::DeserializeOwned>(
        kind: &'static str,
        settings: &toml::Table,
    ) -> Result<T, crate::TransportError> {
        serde_path_to_error::deserialize(toml::Value::Table(settings.clone())).map_err(|e| {
            let field = e.path().to_string();
            crate::TransportError::new(
                kind,
                crate::ErrorKind::Config,
                format!("transport.{field}: {}", e.into_inner()),
            )
        })
    }
}

/// Worker settings.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    /// Messages handled at once.
    pub concurrency: usize,
    /// Longest a handler may run.
    pub handler_timeout: Duration,
    /// Recorded in failed messages' envelopes.
    pub handler_version: Option<String>,
}

/// A loaded, validated config file.
#[derive(Debug, Clone)]
pub struct Config {
    /// `[transport]`.
    pub transport: TransportConfig,
    /// `[worker]`.
    pub worker: WorkerConfig,
    /// `[envelope]`.
    pub limits: EnvelopeLimits,
    /// `[classifier]`.
    pub classifier: RuleClassifier,
    /// `[policies.*]` and `[routes]`.
    pub router: Router,
}

/// Why a config file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not TOML, or a field of the wrong type or shape.
    #[error("{field}: {message}")]
    Syntax {
        /// Dotted path of the field (or `(file)` for syntax errors).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// Well-formed but not workable.
    #[error("{field}: {message}")]
    Invalid {
        /// Dotted path of the field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl ConfigError {
    /// The dotted path of the offending field.
    pub fn field(&self) -> &str {
        match self {
            ConfigError::Io { path, .. } => path,
            ConfigError::Syntax { field, .. } | ConfigError::Invalid { field, .. } => field,
        }
    }
}

impl Config {
    /// Parses and validates a config from TOML text.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let de = toml::Deserializer::parse(text).map_err(|e| ConfigError::Syntax {
            field: "(file)".into(),
            message: e.to_string().trim().to_owned(),
        })?;
        let raw: raw::RawConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            ConfigError::Syntax {
                field: if field == "." { "(file)".into() } else { field },
                message: first_line(&e.into_inner().to_string()),
            }
        })?;
        compile::compile(raw)
    }

    /// Reads, parses and validates a config file.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Config::from_toml(&text)
    }
}

/// toml's messages quote the offending line under the first; the field path
/// already says where, so keep the first line (and its detail if it is
/// only a location).
fn first_line(msg: &str) -> String {
    msg.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('|') && !l.starts_with("-->"))
        .filter(|l| {
            !l.chars()
                .all(|c| c.is_ascii_digit() || c == '|' || c == ' ' || c == '^')
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests;
