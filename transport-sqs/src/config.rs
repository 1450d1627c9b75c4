//! `[transport] kind = "sqs"`: the settings, validated.
//!
//! Queues are named (the transport looks their URLs up, or creates them in
//! `declare` mode) or given as URLs. Region and credentials come from the
//! standard AWS chain (environment, profile, web identity, container, IMDS);
//! `region` and `endpoint` only override it, and no credential is ever a
//! setting here. `credentials = "emulator"` signs with fixed placeholder
//! keys that only an emulator accepts (no real secret is involved).

use std::{fmt, time::Duration};

use parkway_core::{ErrorKind, TopologyMode, TransportError};
use serde::Deserialize;

use crate::KIND;

/// How a retry waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetryMode {
    /// `ChangeMessageVisibility(delay)` on the received message: no copy,
    /// up to 12 h; the attempt is `ApproximateReceiveCount` reconciled with
    /// the envelope.
    #[default]
    Visibility,
    /// Send a copy with the updated envelope and `DelaySeconds` (≤ 15 min),
    /// then delete the original. Standard queues only.
    Resend,
}

/// Where credentials come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CredentialSource {
    /// The standard AWS chain.
    #[default]
    Chain,
    /// Fixed placeholder keys, for an emulator (LocalStack, moto), which
    /// accepts any; never valid on AWS.
    Emulator,
}

/// SQS transport settings.
///
/// ```
/// use parkway_sqs::SqsConfig;
/// let table: toml::Table = toml::from_str(r#"
///     queue = "orders"
///     region = "eu-west-1"
///     endpoint = "http://127.0.0.1:4566"
///     retry_mode = "visibility"
///     visibility_timeout = "30s"
/// "#).unwrap();
/// let c = SqsConfig::from_settings(&table).unwrap();
/// assert_eq!(c.dead_letter_queue_name(), "orders-dlq");
/// ```
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqsConfig {
    /// The source queue: a name (`orders`, `orders.fifo`) or a queue URL.
    pub queue: String,
    /// The dead-letter queue: name or URL (default `<queue>-dlq`, keeping
    /// `.fifo`).
    #[serde(default)]
    pub dead_letter_queue: Option<String>,
    /// Overrides the region of the standard chain.
    #[serde(default)]
    pub region: Option<String>,
    /// Overrides the endpoint (an emulator, a VPC endpoint).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// `chain` (default) or `emulator` (placeholder keys, emulators only).
    #[serde(default)]
    pub credentials: CredentialSource,
    /// Create or verify the queues and their redrive policy.
    #[serde(default)]
    pub topology: TopologyMode,
    /// `visibility` (default) or `resend`.
    #[serde(default)]
    pub retry_mode: RetryMode,
    /// The lease of a received message; a heartbeat renews it while the
    /// handler runs.
    #[serde(default = "default_visibility", with = "humantime_serde")]
    pub visibility_timeout: Duration,
    /// Long-poll wait of a receive (0–20 s, whole seconds).
    #[serde(default = "default_wait", with = "humantime_serde")]
    pub wait_time: Duration,
    /// Concurrent long polls (each fetches up to 10 messages).
    #[serde(default = "default_pollers")]
    pub pollers: usize,
    /// Messages received and not yet settled, at most.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// Receives beyond the policy's attempts before the redrive policy
    /// moves a message to the DLQ by itself (the crash safety net).
    #[serde(default = "default_margin")]
    pub receive_margin: u32,
    /// Longest wait for any SQS call.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub call_timeout: Duration,
}

fn default_visibility() -> Duration {
    Duration::from_secs(30)
}
fn default_wait() -> Duration {
    Duration::from_secs(20)
}
fn default_pollers() -> usize {
    4
}
fn default_max_in_flight() -> usize {
    64
}
fn default_margin() -> u32 {
    5
}
fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

fn config_error(field: &str, why: impl fmt::Display) -> TransportError {
    TransportError::new(KIND, ErrorKind::Config, format!("transport.{field}: {why}"))
}

/// SQS allows a visibility timeout of 0 s to 12 h.
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);
/// SQS allows `DelaySeconds` of 0 s to 15 min.
pub const MAX_SEND_DELAY: Duration = Duration::from_secs(900);

impl SqsConfig {
    /// Settings for a queue; everything else default.
    pub fn new(queue: impl Into<String>) -> Self {
        SqsConfig {
            queue: queue.into(),
            dead_letter_queue: None,
            region: None,
            endpoint: None,
            credentials: CredentialSource::Chain,
            topology: TopologyMode::Declare,
            retry_mode: RetryMode::Visibility,
            visibility_timeout: default_visibility(),
            wait_time: default_wait(),
            pollers: default_pollers(),
            max_in_flight: default_max_in_flight(),
            receive_margin: default_margin(),
            call_timeout: default_timeout(),
        }
    }

    /// Reads and validates the `[transport]` table's settings.
    pub fn from_settings(settings: &toml::Table) -> Result<Self, TransportError> {
        let config: SqsConfig =
            parkway_core::config::TransportConfig::parse_settings(KIND, settings)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the settings hang together.
    pub fn validate(&self) -> Result<(), TransportError> {
        check_queue("queue", &self.queue)?;
        if let Some(dlq) = &self.dead_letter_queue {
            check_queue("dead_letter_queue", dlq)?;
            if is_fifo(dlq) != self.is_fifo() {
                return Err(config_error(
                    "dead_letter_queue",
                    "must be FIFO (`.fifo`) exactly when the queue is",
                ));
            }
        }
        if let Some(e) = &self.endpoint {
            if !(e.starts_with("http://") || e.starts_with("https://")) {
                return Err(config_error(
                    "endpoint",
                    "must be an http:// or https:// URL",
                ));
            }
        }
        if self.region.as_deref().is_some_and(|r| r.trim().is_empty()) {
            return Err(config_error("region", "must not be empty"));
        }
        let vt = self.visibility_timeout;
        if vt < Duration::from_secs(1) || vt > MAX_VISIBILITY || vt.subsec_nanos() != 0 {
            return Err(config_error(
                "visibility_timeout",
                "must be whole seconds between 1s and 12h",
            ));
        }
        if self.wait_time > Duration::from_secs(20) || self.wait_time.subsec_nanos() != 0 {
            return Err(config_error(
                "wait_time",
                "must be whole seconds from 0s to 20s",
            ));
        }
        if self.pollers == 0 || self.pollers > 64 {
            return Err(config_error("pollers", "must be between 1 and 64"));
        }
        if self.max_in_flight == 0 || self.max_in_flight > 100_000 {
            return Err(config_error(
                "max_in_flight",
                "must be between 1 and 100000",
            ));
        }
        if self.receive_margin == 0 || self.receive_margin > 900 {
            return Err(config_error("receive_margin", "must be between 1 and 900"));
        }
        if self.call_timeout < Duration::from_secs(1) {
            return Err(config_error("call_timeout", "must be at least 1s"));
        }
        if self.call_timeout <= self.wait_time {
            return Err(config_error(
                "call_timeout",
                "must be longer than wait_time (a long poll would time out)",
            ));
        }
        if self.is_fifo() && self.retry_mode == RetryMode::Resend {
            return Err(config_error(
                "retry_mode",
                "`resend` needs per-message DelaySeconds, which FIFO queues do not have; use `visibility`",
            ));
        }
        Ok(())
    }

    /// Whether the source queue is FIFO.
    pub fn is_fifo(&self) -> bool {
        is_fifo(&self.queue)
    }

    /// The source queue's name (the last segment of a URL).
    pub fn queue_name(&self) -> String {
        name_of(&self.queue)
    }

    /// The dead-letter queue's name.
    pub fn dead_letter_queue_name(&self) -> String {
        match &self.dead_letter_queue {
            Some(d) => name_of(d),
            None => {
                let q = self.queue_name();
                match q.strip_suffix(".fifo") {
                    Some(base) => format!("{base}-dlq.fifo"),
                    None => format!("{q}-dlq"),
                }
            }
        }
    }

    /// The longest retry delay the chosen mode holds.
    pub fn max_delay(&self) -> Duration {
        match self.retry_mode {
            // A visibility change counts from the receive, and the handler
            // may have held the message up to one visibility timeout.
            RetryMode::Visibility => MAX_VISIBILITY.saturating_sub(self.visibility_timeout),
            RetryMode::Resend => MAX_SEND_DELAY,
        }
    }
}

fn is_fifo(q: &str) -> bool {
    q.ends_with(".fifo")
}

fn name_of(q: &str) -> String {
    q.rsplit('/').next().unwrap_or(q).to_owned()
}

fn check_queue(field: &str, q: &str) -> Result<(), TransportError> {
    let name = name_of(q);
    let base = name.strip_suffix(".fifo").unwrap_or(&name);
    let ok = !base.is_empty()
        && name.len() <= 80
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if ok {
        Ok(())
    } else {
        Err(config_error(
            field,
            "must be a queue URL or a name of 1–80 characters of a-z A-Z 0-9 - _ (and `.fifo`)",
        ))
    }
}

impl fmt::Debug for SqsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqsConfig")
            .field("queue", &self.queue)
            .field("dead_letter_queue", &self.dead_letter_queue_name())
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("topology", &self.topology)
            .field("retry_mode", &self.retry_mode)
            .field("visibility_timeout", &self.visibility_timeout)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> Result<SqsConfig, TransportError> {
        let t: toml::Table = toml::from_str(&format!("queue = \"orders\"\n{extra}")).unwrap();
        SqsConfig::from_settings(&t)
    }

    #[test]
    fn errors_name_the_setting() {
        let e = |x| parse(x).unwrap_err().to_string();
        assert!(e("queue2 = 1").contains("queue2"));
        assert!(e("visibility_timeout = \"500ms\"").contains("transport.visibility_timeout"));
        assert!(e("wait_time = \"21s\"").contains("transport.wait_time"));
        assert!(e("pollers = 0").contains("transport.pollers"));
        assert!(e("retry_mode = \"sometimes\"").contains("transport.retry_mode"));
        assert!(e("endpoint = \"127.0.0.1:4566\"").contains("transport.endpoint"));
        assert!(e("dead_letter_queue = \"dlq.fifo\"").contains("transport.dead_letter_queue"));
        assert!(parse("retry_mode = \"resend\"").is_ok());
    }

    #[test]
    fn fifo_queues_cannot_resend() {
        let t: toml::Table =
            toml::from_str("queue = \"ledger.fifo\"\nretry_mode = \"resend\"").unwrap();
        let e = SqsConfig::from_settings(&t).unwrap_err().to_string();
        assert!(e.contains("transport.retry_mode"), "{e}");
    }

    #[test]
    fn names_and_limits() {
        let c = SqsConfig::new("http://127.0.0.1:4566/000000000000/ledger.fifo");
        assert!(c.is_fifo());
        assert_eq!(c.queue_name(), "ledger.fifo");
        assert_eq!(c.dead_letter_queue_name(), "ledger-dlq.fifo");
        assert_eq!(c.max_delay(), MAX_VISIBILITY - Duration::from_secs(30));
        let mut r = SqsConfig::new("orders");
        r.retry_mode = RetryMode::Resend;
        assert_eq!(r.max_delay(), MAX_SEND_DELAY);
    }
}
