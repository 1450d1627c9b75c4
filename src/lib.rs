//! # Parkway
//!
//! A broker-agnostic async retry engine: every failed message gets one
//! explicit, bounded, inspectable lifecycle — **classify → retry budget →
//! backoff with jitter → park → redrive** — whatever the broker.
//!
//! This facade re-exports [`parkway_core`] and turns a config file's
//! `[transport]` table into a transport with [`connect`] — or, without a
//! broker, into the plan that transport would build with [`plan`]. Broker
//! transports are cargo features: `rabbitmq`, `kafka`, `sqs`. The `cli`
//! feature (on by default) builds the `parkway` operator binary.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = parkway::config::Config::from_toml(r#"
//!     [transport]
//!     kind = "memory"
//!     queue = "orders"
//!     [policies.default]
//!     max_attempts = 3
//! "#)?;
//! let transport = parkway::connect(&config).await?;
//! assert_eq!(transport.kind(), "memory");
//! # Ok(()) }
//! ```
#![doc(test(attr(deny(warnings))))]

pub use parkway_core::*;

#[cfg(feature = "rabbitmq")]
pub use parkway_rabbitmq as rabbitmq;

#[cfg(feature = "kafka")]
pub use parkway_kafka as kafka;

#[cfg(feature = "sqs")]
pub use parkway_sqs as sqs;

mod plan;

pub use plan::{check_policies, compiled_kinds, plan};

use std::sync::Arc;

use parkway_core::{config::Config, memory::MemoryTransport};

/// Every transport kind Parkway knows, and the cargo feature that builds it.
pub const KINDS: &[(&str, Option<&str>)] = &[
    ("memory", None),
    ("rabbitmq", Some("rabbitmq")),
    ("kafka", Some("kafka")),
    ("sqs", Some("sqs")),
];

/// Why [`connect`] could not produce a transport.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// `[transport] kind` names no transport Parkway knows.
    #[error("transport.kind: unknown transport {kind:?}; known kinds: {}", KINDS.iter().map(|k| k.0).collect::<Vec<_>>().join(", "))]
    UnknownKind {
        /// The kind from the file.
        kind: String,
    },
    /// The kind is known but this build does not include it.
    #[error(
        "transport.kind: the {kind} transport is not compiled in; enable the `{feature}` feature of the parkway crate"
    )]
    NotCompiled {
        /// The kind from the file.
        kind: String,
        /// The cargo feature to enable.
        feature: String,
    },
    /// A setting in `[transport]` is wrong.
    #[error("transport.{setting}: {why}")]
    Setting {
        /// The setting.
        setting: String,
        /// What is wrong.
        why: String,
    },
    /// The transport could not start (connect, declare, verify).
    #[error(transparent)]
    Transport(#[from] TransportError),
}

/// Builds the transport named by the config's `[transport]` table, planned
/// for the config's policies.
///
/// `memory` reads one optional setting, `queue` (default `"parkway"`);
/// `rabbitmq` reads `parkway_rabbitmq::RabbitConfig`, `kafka` reads
/// `parkway_kafka::KafkaConfig`, `sqs` reads `parkway_sqs::SqsConfig`.
pub async fn connect(config: &Config) -> Result<Arc<dyn Transport>, ConnectError> {
    let t = &config.transport;
    match t.kind.as_str() {
        "memory" => memory(t),
        #[cfg(feature = "rabbitmq")]
        "rabbitmq" => {
            let settings = parkway_rabbitmq::RabbitConfig::from_settings(&t.settings)?;
            let policies: Vec<&RetryPolicy> = config.router.policies().map(|p| &p.policy).collect();
            let transport = parkway_rabbitmq::RabbitTransport::connect(settings, policies).await?;
            Ok(Arc::new(transport))
        }
        #[cfg(feature = "kafka")]
        "kafka" => {
            let settings = parkway_kafka::KafkaConfig::from_settings(&t.settings)?;
            let policies: Vec<&RetryPolicy> = config.router.policies().map(|p| &p.policy).collect();
            let transport = parkway_kafka::KafkaTransport::connect(settings, policies).await?;
            Ok(Arc::new(transport))
        }
        #[cfg(feature = "sqs")]
        "sqs" => {
            let settings = parkway_sqs::SqsConfig::from_settings(&t.settings)?;
            let policies: Vec<&RetryPolicy> = config.router.policies().map(|p| &p.policy).collect();
            let transport = parkway_sqs::SqsTransport::connect(settings, policies).await?;
            Ok(Arc::new(transport))
        }
        other => Err(not_known(other)),
    }
}

/// The error for a kind this build cannot make: not compiled in, or unknown.
fn not_known(kind: &str) -> ConnectError {
    match KINDS.iter().find(|k| k.0 == kind) {
        Some((kind, Some(feature))) => ConnectError::NotCompiled {
            kind: (*kind).to_owned(),
            feature: (*feature).to_owned(),
        },
        _ => ConnectError::UnknownKind {
            kind: kind.to_owned(),
        },
    }
}

fn memory(t: &config::TransportConfig) -> Result<Arc<dyn Transport>, ConnectError> {
    Ok(Arc::new(MemoryTransport::new(memory_queue(t)?)))
}

/// The memory transport's one setting, `queue` (default `"parkway"`).
fn memory_queue(t: &config::TransportConfig) -> Result<&str, ConnectError> {
    for key in t.settings.keys() {
        if key != "queue" {
            return Err(ConnectError::Setting {
                setting: key.clone(),
                why: "not a setting of the memory transport (it has: queue)".into(),
            });
        }
    }
    match t.settings.get("queue") {
        None => Ok("parkway"),
        Some(v) => v.as_str().ok_or_else(|| ConnectError::Setting {
            setting: "queue".into(),
            why: "must be a string".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(transport: &str) -> Config {
        Config::from_toml(&format!("[transport]\n{transport}\n[policies.p]\n")).unwrap()
    }

    #[tokio::test]
    async fn unknown_kinds_and_settings_are_named() {
        let e = connect(&config("kind = \"carrier-pigeon\""))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("carrier-pigeon"), "{e}");
        let e = connect(&config("kind = \"memory\"\nqeueu = \"x\""))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("transport.qeueu"), "{e}");
        let e = connect(&config("kind = \"memory\"\nqueue = 3"))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("transport.queue"), "{e}");
    }

    #[cfg(not(feature = "rabbitmq"))]
    #[tokio::test]
    async fn a_transport_not_compiled_in_names_its_feature() {
        let e = connect(&config("kind = \"rabbitmq\"")).await.unwrap_err();
        assert!(e.to_string().contains("`rabbitmq` feature"), "{e}");
    }

    #[cfg(feature = "sqs")]
    #[tokio::test]
    async fn bad_sqs_settings_are_named() {
        let e = connect(&config(
            "kind = \"sqs\"\nqueue = \"orders\"\nvisibility_timeout = \"0s\"",
        ))
        .await
        .unwrap_err();
        assert!(
            e.to_string().contains("transport.visibility_timeout"),
            "{e}"
        );
    }

    #[cfg(feature = "rabbitmq")]
    #[tokio::test]
    async fn bad_rabbitmq_settings_are_named() {
        let e = connect(&config(
            "kind = \"rabbitmq\"\nurl = \"amqp://h\"\nqueue = \"q\"\nprefetch = 0",
        ))
        .await
        .unwrap_err();
        assert!(e.to_string().contains("transport.prefetch"), "{e}");
    }
}
