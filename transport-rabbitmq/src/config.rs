//! `[transport] kind = "rabbitmq"`: the settings, validated, with the URL's
//! password never shown.

use std::{fmt, time::Duration};

use parkway_core::{ErrorKind, TopologyMode, TransportError};
use serde::Deserialize;

use crate::KIND;

/// Classic or quorum queues (for the work, wait and parking queues alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum QueueType {
    /// Classic queues.
    #[default]
    Classic,
    /// Replicated quorum queues, dead-lettering at least once.
    Quorum,
}

/// RabbitMQ transport settings.
///
/// ```
/// use parkway_rabbitmq::RabbitConfig;
/// let table: toml::Table = toml::from_str(r#"
///     url = "amqp://guest:secret@127.0.0.1:5672/%2f"
///     queue = "orders"
///     queue_type = "quorum"
/// "#).unwrap();
/// let c = RabbitConfig::from_settings(&table).unwrap();
/// assert_eq!(c.prefetch, 32);
/// assert!(!format!("{c:?}").contains("secret"));
/// ```
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RabbitConfig {
    /// `amqp://user:password@host:port/vhost`.
    pub url: String,
    /// The work queue.
    pub queue: String,
    /// The work exchange (default: the queue's name).
    #[serde(default)]
    pub exchange: Option<String>,
    /// Routing key binding the work queue (default: the queue's name).
    #[serde(default)]
    pub routing_key: Option<String>,
    /// Classic or quorum.
    #[serde(default)]
    pub queue_type: QueueType,
    /// Unacknowledged deliveries per consumer (ordered policies use 1).
    #[serde(default = "default_prefetch")]
    pub prefetch: u16,
    /// Declare or verify the topology.
    #[serde(default)]
    pub topology: TopologyMode,
    /// Quorum `x-delivery-limit`: the broker's safety net for crash loops;
    /// messages over it are dead-lettered to the parking queue.
    #[serde(default)]
    pub delivery_limit: Option<u32>,
    /// Longest wait for a publisher confirm.
    #[serde(default = "default_confirm_timeout", with = "humantime_serde")]
    pub confirm_timeout: Duration,
    /// The parking queue (default: `<queue>.parking`).
    #[serde(default)]
    pub parking_queue: Option<String>,
    /// Prefix of the wait queues (default: `<queue>.wait`).
    #[serde(default)]
    pub wait_prefix: Option<String>,
}

fn default_prefetch() -> u16 {
    32
}

fn default_confirm_timeout() -> Duration {
    Duration::from_secs(10)
}

fn config_error(field: &str, why: impl fmt::Display) -> TransportError {
    TransportError::new(KIND, ErrorKind::Config, format!("transport.{field}: {why}"))
}

impl RabbitConfig {
    /// Settings for `url` and `queue`, everything else default.
    pub fn new(url: impl Into<String>, queue: impl Into<String>) -> Self {
        RabbitConfig {
            url: url.into(),
            queue: queue.into(),
            exchange: None,
            routing_key: None,
            queue_type: QueueType::Classic,
            prefetch: default_prefetch(),
            topology: TopologyMode::Declare,
            delivery_limit: None,
            confirm_timeout: default_confirm_timeout(),
            parking_queue: None,
            wait_prefix: None,
        }
    }

    /// Reads and validates the `[transport]` table's settings.
    pub fn from_settings(settings: &toml::Table) -> Result<Self, TransportError> {
        let config: RabbitConfig =
            parkway_core::config::TransportConfig::parse_settings(KIND, settings)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the settings hang together.
    pub fn validate(&self) -> Result<(), TransportError> {
        if !(self.url.starts_with("amqp://") || self.url.starts_with("amqps://")) {
            return Err(config_error("url", "must start with amqp:// or amqps://"));
        }
        for (field, name) in [
            ("queue", Some(&self.queue)),
            ("exchange", self.exchange.as_ref()),
            ("routing_key", self.routing_key.as_ref()),
            ("parking_queue", self.parking_queue.as_ref()),
            ("wait_prefix", self.wait_prefix.as_ref()),
        ] {
            if let Some(n) = name {
                if n.is_empty() || n.len() > 200 {
                    return Err(config_error(field, "must be 1 to 200 bytes long"));
                }
            }
        }
        if self.prefetch == 0 {
            return Err(config_error("prefetch", "must be at least 1"));
        }
        if self.delivery_limit.is_some() && self.queue_type != QueueType::Quorum {
            return Err(config_error(
                "delivery_limit",
                "only quorum queues have a delivery limit; set queue_type = \"quorum\"",
            ));
        }
        if self.confirm_timeout.is_zero() {
            return Err(config_error("confirm_timeout", "must be greater than zero"));
        }
        Ok(())
    }

    /// The URL with its password replaced by `***`, for logs.
    pub fn redacted_url(&self) -> String {
        redact(&self.url)
    }
}

/// Hides the password of `scheme://user:password@host`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "***".into();
    };
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let shown = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{user}:***@{host}")
        }
        None => authority.to_owned(),
    };
    if path.is_empty() {
        format!("{scheme}://{shown}")
    } else {
        format!("{scheme}://{shown}/{path}")
    }
}

impl fmt::Debug for RabbitConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitConfig")
            .field("url", &self.redacted_url())
            .field("queue", &self.queue)
            .field("exchange", &self.exchange)
            .field("routing_key", &self.routing_key)
            .field("queue_type", &self.queue_type)
            .field("prefetch", &self.prefetch)
            .field("topology", &self.topology)
            .field("delivery_limit", &self.delivery_limit)
            .field("confirm_timeout", &self.confirm_timeout)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> Result<RabbitConfig, TransportError> {
        let t: toml::Table = toml::from_str(&format!(
            "url = \"amqp://u:p@h/%2f\"\nqueue = \"q\"\n{extra}"
        ))
        .unwrap();
        RabbitConfig::from_settings(&t)
    }

    #[test]
    fn errors_name_the_setting() {
        let e = |extra| parse(extra).unwrap_err().to_string();
        assert!(e("prefetch = 0").contains("transport.prefetch"));
        assert!(e("prefetch = -1").contains("transport.prefetch"));
        assert!(e("queue_type = \"stream\"").contains("transport.queue_type"));
        assert!(e("delivery_limit = 5").contains("transport.delivery_limit"));
        assert!(e("qeueu = \"x\"").contains("qeueu"));
        assert!(parse("queue_type = \"quorum\"\ndelivery_limit = 5").is_ok());
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("amqp://guest:guest@127.0.0.1:5672/%2f"),
            "amqp://guest:***@127.0.0.1:5672/%2f"
        );
        assert_eq!(redact("amqp://host"), "amqp://host");
        assert_eq!(redact("amqp://a:b:c@h"), "amqp://a:***@h");
        assert_eq!(redact("garbage"), "***");
    }
}
