//! Creating, verifying and deleting the transport's topics.

use std::time::Duration;

use parkway_core::{ErrorKind, TransportError};
use rdkafka::{
    ClientConfig,
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    error::RDKafkaErrorCode,
    producer::{FutureProducer, Producer},
};

use crate::{KIND, KafkaConfig, TierPlan, TopologyMode};

fn kafka_error(doing: &str, e: impl std::error::Error + Send + Sync + 'static) -> TransportError {
    TransportError::new(KIND, ErrorKind::Disconnected, format!("could not {doing}")).with_source(e)
}

pub(crate) fn client_config(config: &KafkaConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &config.bootstrap_servers);
    for (k, v) in &config.librdkafka {
        c.set(k, v);
    }
    c
}

/// Partitions of a topic, or `None` if it does not exist.
pub(crate) fn partitions(
    producer: &FutureProducer,
    topic: &str,
) -> Result<Option<i32>, TransportError> {
    // Ask for every topic: asking for one that does not exist makes some
    // Kafka-protocol brokers answer with a nameless topic, which crashes
    // librdkafka 2.12's metadata cache.
    let md = producer
        .client()
        .fetch_metadata(None, Duration::from_secs(10))
        .map_err(|e| kafka_error(&format!("read the metadata of `{topic}`"), e))?;
    Ok(md
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map(|t| i32::try_from(t.partitions().len()).unwrap_or(i32::MAX))
        .filter(|n| *n > 0))
}

/// Every topic the transport needs besides the source: tiers, dead letters,
/// the replay index and the control topic.
pub(crate) fn derived_topics(config: &KafkaConfig, plan: &TierPlan) -> Vec<(String, bool)> {
    plan.labels()
        .map(|l| (config.tier_topic(l), false))
        .chain([
            (config.dlt(), false),
            (config.replayed_topic(), true),
            (config.control_topic(), false),
        ])
        .collect()
}

/// Creates (declare) or checks (verify) the derived topics, with the source
/// topic's partition count.
pub(crate) async fn ensure(
    config: &KafkaConfig,
    plan: &TierPlan,
    producer: &FutureProducer,
) -> Result<(), TransportError> {
    let Some(n) = partitions(producer, &config.topic)? else {
        return Err(TransportError::new(
            KIND,
            ErrorKind::Topology,
            format!("source topic `{}` does not exist", config.topic),
        ));
    };
    let topics = derived_topics(config, plan);
    let mut missing = Vec::new();
    for (t, compacted) in &topics {
        if partitions(producer, t)?.is_none() {
            missing.push((t.clone(), *compacted));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    if config.topology == TopologyMode::Verify {
        let names: Vec<_> = missing.iter().map(|(t, _)| format!("`{t}`")).collect();
        return Err(TransportError::new(
            KIND,
            ErrorKind::Topology,
            format!(
                "missing topics (topology = \"verify\"): {}",
                names.join(", ")
            ),
        ));
    }
    let admin: AdminClient<DefaultClientContext> = client_config(config)
        .create()
        .map_err(|e| kafka_error("create an admin client", e))?;
    let new: Vec<NewTopic<'_>> = missing
        .iter()
        .map(|(t, compacted)| {
            let nt = NewTopic::new(t, n, TopicReplication::Fixed(1));
            if *compacted {
                nt.set("cleanup.policy", "compact")
            } else {
                nt
            }
        })
        .collect();
    let results = admin
        .create_topics(new.iter(), &AdminOptions::new())
        .await
        .map_err(|e| kafka_error("create topics", e))?;
    for r in results {
        if let Err((t, code)) = r {
            if code != RDKafkaErrorCode::TopicAlreadyExists {
                return Err(TransportError::new(
                    KIND,
                    ErrorKind::Topology,
                    format!("could not create topic `{t}`: {code}"),
                ));
            }
        }
    }
    Ok(())
}

/// Deletes the derived topics (and the source topic if asked).
pub(crate) async fn delete(
    config: &KafkaConfig,
    plan: &TierPlan,
    source_too: bool,
) -> Result<(), TransportError> {
    let admin: AdminClient<DefaultClientContext> = client_config(config)
        .create()
        .map_err(|e| kafka_error("create an admin client", e))?;
    let mut names: Vec<String> = derived_topics(config, plan)
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    if source_too {
        names.push(config.topic.clone());
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    admin
        .delete_topics(&refs, &AdminOptions::new())
        .await
        .map_err(|e| kafka_error("delete topics", e))?;
    Ok(())
}

/// Creates a topic (for tests and tools that own the source topic).
pub async fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
) -> Result<(), TransportError> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .map_err(|e| kafka_error("create an admin client", e))?;
    let t = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let results = admin
        .create_topics([&t], &AdminOptions::new())
        .await
        .map_err(|e| kafka_error(&format!("create topic `{topic}`"), e))?;
    for r in results {
        if let Err((t, code)) = r {
            if code != RDKafkaErrorCode::TopicAlreadyExists {
                return Err(TransportError::new(
                    KIND,
                    ErrorKind::Topology,
                    format!("could not create topic `{t}`: {code}"),
                ));
            }
        }
    }
    Ok(())
}
