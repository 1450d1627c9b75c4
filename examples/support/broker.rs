//! Opening the transport a config names, and a producer for it.
//!
//! The worker gets its transport from [`parkway::connect`], exactly as a
//! service would. Feeding it needs a producer, which is not part of the
//! `Transport` contract (services are fed by other services): for a broker
//! the example opens a second client on the same queue or topic; the
//! in-memory queue is its own broker, so there the example keeps the handle
//! it publishes with.

use std::{error::Error, sync::Arc};

use parkway::{Message, Transport, TransportError, config::Config, memory::MemoryTransport};

/// Publishes test messages to the config's queue or topic.
#[derive(Debug, Clone)]
pub enum Producer {
    /// The in-memory queue itself.
    Memory(MemoryTransport),
    /// A RabbitMQ client on the same work queue.
    #[cfg(feature = "rabbitmq")]
    Rabbit(parkway::rabbitmq::RabbitTransport),
    /// A Kafka client on the same source topic.
    #[cfg(feature = "kafka")]
    Kafka(parkway::kafka::KafkaTransport),
    /// An SQS client on the same source queue.
    #[cfg(feature = "sqs")]
    Sqs(parkway::sqs::SqsTransport),
}

impl Producer {
    /// Publishes one message (durably accepted by the broker).
    pub async fn publish(&self, msg: Message) -> Result<(), TransportError> {
        match self {
            Producer::Memory(t) => {
                t.publish(msg);
                Ok(())
            }
            #[cfg(feature = "rabbitmq")]
            Producer::Rabbit(t) => t.publish(&msg).await,
            #[cfg(feature = "kafka")]
            Producer::Kafka(t) => t.publish(&msg).await,
            #[cfg(feature = "sqs")]
            Producer::Sqs(t) => t.publish(&msg).await,
        }
    }

    /// Closes the client, leaving the queues or topics (and what is parked
    /// there) for `parkway parked list` to find.
    pub async fn close(&self) {
        match self {
            Producer::Memory(t) => t.close(),
            #[cfg(feature = "rabbitmq")]
            Producer::Rabbit(t) => t.close().await,
            #[cfg(feature = "kafka")]
            Producer::Kafka(t) => t.close().await,
            #[cfg(feature = "sqs")]
            Producer::Sqs(t) => t.close().await,
        }
    }

    /// Closes the client; on RabbitMQ also deletes this run's queues and
    /// exchange, on SQS this run's queue and its DLQ. (Kafka topics stay:
    /// their names are unique per run.)
    pub async fn cleanup(&self) {
        match self {
            Producer::Memory(t) => t.close(),
            #[cfg(feature = "rabbitmq")]
            Producer::Rabbit(t) => {
                let _ = t.delete_topology().await;
                t.close().await;
            }
            #[cfg(feature = "kafka")]
            Producer::Kafka(t) => t.close().await,
            #[cfg(feature = "sqs")]
            Producer::Sqs(t) => {
                let _ = t.delete_queues().await;
                t.close().await;
            }
        }
    }
}

/// The worker's transport and a producer on the same queue or topic.
#[derive(Debug)]
pub struct Opened {
    /// For the worker, from `parkway::connect`.
    pub transport: Arc<dyn Transport>,
    /// For the example's messages.
    pub producer: Producer,
}

/// Gives this run its own queue, topic and group (`<name>-<hex>`, before
/// an SQS FIFO queue's `.fifo`), so that reruns never see an earlier run's
/// messages. Returns the suffix.
pub fn per_run(config: &mut Config) -> String {
    let run = format!("{:08x}", fastrand::u32(..));
    for key in ["queue", "topic", "group_id"] {
        if let Some(v) = config.transport.settings.get(key).and_then(|v| v.as_str()) {
            let renamed = match v.strip_suffix(".fifo") {
                Some(base) => format!("{base}-{run}.fifo"),
                None => format!("{v}-{run}"),
            };
            config
                .transport
                .settings
                .insert(key.to_owned(), toml::Value::String(renamed));
        }
    }
    run
}

/// Opens the config's transport for a worker, and a producer for it.
/// A kind this build lacks fails with `parkway::connect`'s error naming the
/// cargo feature. On Kafka the source topic is created first with
/// `partitions` (a service's source topic is owned by its producers).
#[cfg_attr(not(feature = "kafka"), allow(unused_variables))]
pub async fn open(config: &Config, partitions: i32) -> Result<Opened, Box<dyn Error>> {
    if config.transport.kind == "memory" {
        let queue = config
            .transport
            .settings
            .get("queue")
            .and_then(|v| v.as_str())
            .unwrap_or("parkway");
        let t = MemoryTransport::new(queue);
        return Ok(Opened {
            transport: Arc::new(t.clone()),
            producer: Producer::Memory(t),
        });
    }
    #[cfg(feature = "kafka")]
    if config.transport.kind == "kafka" {
        let settings = parkway::kafka::KafkaConfig::from_settings(&config.transport.settings)?;
        parkway::kafka::create_topic(&settings.bootstrap_servers, &settings.topic, partitions)
            .await
            .map_err(|e| {
                format!("{e}\n  is Kafka running? scripts/kafka-start starts the test broker")
            })?;
    }
    let transport = parkway::connect(config).await.map_err(|e| {
        let unreachable = matches!(&e, parkway::ConnectError::Transport(t) if t.kind() != parkway::ErrorKind::Config);
        let hint = match config.transport.kind.as_str() {
            "rabbitmq" if unreachable => "\n  is RabbitMQ running? scripts/rabbitmq-start starts it",
            "kafka" if unreachable => "\n  is Kafka running? scripts/kafka-start starts the test broker",
            "sqs" if unreachable => "\n  is the SQS emulator running? scripts/sqs-start starts it",
            _ => "",
        };
        format!("{e}{hint}")
    })?;
    let producer = producer(config).await?;
    Ok(Opened {
        transport,
        producer,
    })
}

async fn producer(config: &Config) -> Result<Producer, Box<dyn Error>> {
    #[cfg(any(feature = "rabbitmq", feature = "kafka", feature = "sqs"))]
    let policies: Vec<&parkway::RetryPolicy> =
        config.router.policies().map(|p| &p.policy).collect();
    match config.transport.kind.as_str() {
        #[cfg(feature = "rabbitmq")]
        "rabbitmq" => {
            let s = parkway::rabbitmq::RabbitConfig::from_settings(&config.transport.settings)?;
            let t = parkway::rabbitmq::RabbitTransport::connect(s, policies).await?;
            Ok(Producer::Rabbit(t))
        }
        #[cfg(feature = "kafka")]
        "kafka" => {
            let s = parkway::kafka::KafkaConfig::from_settings(&config.transport.settings)?;
            let t = parkway::kafka::KafkaTransport::connect(s, policies).await?;
            Ok(Producer::Kafka(t))
        }
        #[cfg(feature = "sqs")]
        "sqs" => {
            let s = parkway::sqs::SqsConfig::from_settings(&config.transport.settings)?;
            let t = parkway::sqs::SqsTransport::connect(s, policies).await?;
            Ok(Producer::Sqs(t))
        }
        other => Err(format!("no producer for transport kind {other:?}").into()),
    }
}
