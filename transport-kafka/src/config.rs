//! `[transport] kind = "kafka"`: the settings, validated.

use std::{collections::BTreeMap, fmt, time::Duration};

use parkway_core::{ErrorKind, TopologyMode, TransportError};
use serde::Deserialize;

use crate::KIND;

/// Kafka transport settings.
///
/// ```
/// use parkway_kafka::KafkaConfig;
/// let table: toml::Table = toml::from_str(r#"
///     bootstrap_servers = "127.0.0.1:9092"
///     group_id = "ledger"
///     topic = "ledger.txns"
///     [librdkafka]
///     "fetch.wait.max.ms" = "50"
/// "#).unwrap();
/// let c = KafkaConfig::from_settings(&table).unwrap();
/// assert_eq!(c.dlt(), "ledger.txns.dlt");
/// ```
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// `host:port[,host:port…]`.
    pub bootstrap_servers: String,
    /// The consumer group.
    pub group_id: String,
    /// The source topic.
    pub topic: String,
    /// Prefix of the retry-tier topics (default `<topic>.retry`).
    #[serde(default)]
    pub retry_prefix: Option<String>,
    /// The dead-letter topic (default `<topic>.dlt`).
    #[serde(default)]
    pub dead_letter_topic: Option<String>,
    /// Create or verify the topics.
    #[serde(default)]
    pub topology: TopologyMode,
    /// Longest wait for a produce's delivery report.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub produce_timeout: Duration,
    /// Records buffered per partition. A full source partition (retry-topic
    /// mode) makes the fetcher wait for room; a full retry-tier or ordered
    /// partition, which may not drain soon, is paused so the rest flows.
    #[serde(default = "default_buffer")]
    pub buffer_per_partition: usize,
    /// How long finished offsets gather before one commit carries them all
    /// (`0s` commits each at once). Only the contiguous finished prefix is
    /// ever committed; a crash redelivers at most this much more.
    #[serde(default = "default_commit_interval", with = "humantime_serde")]
    pub commit_interval: Duration,
    /// Passed to librdkafka as is (`"fetch.wait.max.ms" = "50"`); Parkway's
    /// own settings (group, offsets, idempotence) cannot be overridden.
    #[serde(default)]
    pub librdkafka: BTreeMap<String, String>,
}

fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_buffer() -> usize {
    1000
}

fn default_commit_interval() -> Duration {
    Duration::from_millis(5)
}

fn config_error(field: &str, why: impl fmt::Display) -> TransportError {
    TransportError::new(KIND, ErrorKind::Config, format!("transport.{field}: {why}"))
}

/// Settings Parkway sets itself.
const RESERVED: &[&str] = &[
    "group.id",
    "bootstrap.servers",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.idempotence",
    "acks",
];

impl KafkaConfig {
    /// Settings for a broker, group and topic; everything else default.
    pub fn new(
        bootstrap: impl Into<String>,
        group: impl Into<String>,
        topic: impl Into<String>,
    ) -> Self {
        KafkaConfig {
            bootstrap_servers: bootstrap.into(),
            group_id: group.into(),
            topic: topic.into(),
            retry_prefix: None,
            dead_letter_topic: None,
            topology: TopologyMode::Declare,
            produce_timeout: default_timeout(),
            buffer_per_partition: default_buffer(),
            commit_interval: default_commit_interval(),
            librdkafka: BTreeMap::new(),
        }
    }

    /// Reads and validates the `[transport]` table's settings.
    pub fn from_settings(settings: &toml::Table) -> Result<Self, TransportError> {
        let config: KafkaConfig =
            parkway_core::config::TransportConfig::parse_settings(KIND, settings)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the settings hang together.
    pub fn validate(&self) -> Result<(), TransportError> {
        if self.bootstrap_servers.trim().is_empty() {
            return Err(config_error(
                "bootstrap_servers",
                "must name at least one broker",
            ));
        }
        if self.group_id.trim().is_empty() {
            return Err(config_error("group_id", "must not be empty"));
        }
        for (field, name) in [
            ("topic", Some(&self.topic)),
            ("retry_prefix", self.retry_prefix.as_ref()),
            ("dead_letter_topic", self.dead_letter_topic.as_ref()),
        ] {
            if let Some(n) = name {
                let ok = !n.is_empty()
                    && n.len() <= 200
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
                if !ok {
                    return Err(config_error(
                        field,
                        "must be 1–200 characters of a-z A-Z 0-9 . _ -",
                    ));
                }
            }
        }
        if self.buffer_per_partition == 0 {
            return Err(config_error("buffer_per_partition", "must be at least 1"));
        }
        if self.commit_interval > Duration::from_secs(10) {
            return Err(config_error(
                "commit_interval",
                "must be at most 10s (a crash redelivers up to this much work)",
            ));
        }
        if let Some(k) = self
            .librdkafka
            .keys()
            .find(|k| RESERVED.contains(&k.as_str()))
        {
            return Err(config_error(
                &format!("librdkafka.{k}"),
                "is set by Parkway (offsets are committed only past finished records)",
            ));
        }
        Ok(())
    }

    /// The dead-letter topic.
    pub fn dlt(&self) -> String {
        self.dead_letter_topic
            .clone()
            .unwrap_or_else(|| format!("{}.dlt", self.topic))
    }

    /// The topic recording which dead-letter records were replayed.
    pub fn replayed_topic(&self) -> String {
        format!("{}.replayed", self.dlt())
    }

    /// The control topic: halt notices and operator actions (resume,
    /// skip-to-dlt) for pause-partition consumers.
    pub fn control_topic(&self) -> String {
        format!("{}.control", self.topic)
    }

    /// The retry-tier topic for a tier label (`1s`, `10s`, …).
    pub fn tier_topic(&self, label: &str) -> String {
        let prefix = self
            .retry_prefix
            .clone()
            .unwrap_or_else(|| format!("{}.retry", self.topic));
        format!("{prefix}.{label}")
    }
}

impl fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaConfig")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("group_id", &self.group_id)
            .field("topic", &self.topic)
            .field("topology", &self.topology)
            // librdkafka settings may hold SASL passwords: names only.
            .field("librdkafka", &self.librdkafka.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> Result<KafkaConfig, TransportError> {
        let t: toml::Table = toml::from_str(&format!(
            "bootstrap_servers = \"h:9092\"\ngroup_id = \"g\"\ntopic = \"t\"\n{extra}"
        ))
        .unwrap();
        KafkaConfig::from_settings(&t)
    }

    #[test]
    fn errors_name_the_setting() {
        let e = |x| parse(x).unwrap_err().to_string();
        assert!(e("topic2 = 1").contains("topic2"));
        assert!(e("buffer_per_partition = 0").contains("transport.buffer_per_partition"));
        assert!(e("commit_interval = \"1m\"").contains("transport.commit_interval"));
        assert!(
            e("[librdkafka]\n\"enable.auto.commit\" = \"true\"")
                .contains("librdkafka.enable.auto.commit")
        );
        assert!(e("dead_letter_topic = \"has space\"").contains("transport.dead_letter_topic"));
        assert!(parse("[librdkafka]\n\"fetch.wait.max.ms\" = \"50\"").is_ok());
    }

    #[test]
    fn secrets_in_passthrough_settings_are_not_shown() {
        let c = parse("[librdkafka]\n\"sasl.password\" = \"hunter2\"").unwrap();
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
