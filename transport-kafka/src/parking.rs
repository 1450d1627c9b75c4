//! The dead-letter topic as a [`ParkingLot`].
//!
//! A log cannot remove a record, so "moved" is remembered instead: each
//! replayed dead-letter record's `partition:offset` is written to a
//! compacted replay-index topic (`<dlt>.replayed`) after its copy is
//! accepted at the source topic. Browsing and sweeping skip what the index
//! lists, so running the same redrive twice never replays a record twice;
//! a crash between the copy and the index entry replays it once more (at
//! least once, never lost).

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use async_trait::async_trait;
use parkway_core::{Choice, ErrorKind, Message, Parked, ParkingLot, Selector, TransportError};
use rdkafka::{
    Offset, TopicPartitionList,
    consumer::{Consumer, StreamConsumer},
    message::{Header, Message as _, OwnedHeaders},
};

use crate::{
    KIND, admin,
    headers::{for_copy, to_headers, understand_spring},
    transport::Inner,
};

#[derive(Clone)]
pub(crate) struct KafkaParkingLot {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for KafkaParkingLot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaParkingLot")
            .field("topic", &self.inner.config.dlt())
            .finish()
    }
}

/// A record read back from a topic.
pub(crate) struct Read {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) payload: Vec<u8>,
    pub(crate) headers: Option<OwnedHeaders>,
    pub(crate) timestamp: Option<i64>,
}

fn err(doing: &str, e: impl std::error::Error + Send + Sync + 'static) -> TransportError {
    TransportError::new(KIND, ErrorKind::Disconnected, format!("could not {doing}")).with_source(e)
}

impl KafkaParkingLot {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        KafkaParkingLot { inner }
    }

    /// Reads a whole topic from its low to its high watermarks, in
    /// partition and offset order.
    pub(crate) async fn read_all(&self, topic: &str) -> Result<Vec<Read>, TransportError> {
        let config = &self.inner.config;
        let consumer: StreamConsumer = admin::client_config(config)
            .set("group.id", format!("parkway-browse-{}", fastrand_suffix()))
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .create()
            .map_err(|e| err("create a reader", e))?;
        let n = admin::partitions(&self.inner.producer, topic)?.unwrap_or(0);
        let mut tpl = TopicPartitionList::new();
        let mut targets = HashMap::new();
        for p in 0..n {
            let (low, high) = consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .map_err(|e| err(&format!("read the watermarks of `{topic}`"), e))?;
            if high > low {
                tpl.add_partition_offset(topic, p, Offset::Offset(low))
                    .map_err(|e| err("assign", e))?;
                targets.insert(p, high);
            }
        }
        let mut out = Vec::new();
        if targets.is_empty() {
            return Ok(out);
        }
        consumer.assign(&tpl).map_err(|e| err("assign", e))?;
        // Read to the high watermarks, then on until the topic is quiet for
        // a moment: some Kafka-protocol brokers report a high watermark
        // that lags the last batch.
        loop {
            let wait = if targets.is_empty() {
                Duration::from_millis(300)
            } else {
                Duration::from_secs(10)
            };
            let m = match tokio::time::timeout(wait, consumer.recv()).await {
                Ok(Ok(m)) => m,
                Ok(Err(e)) => return Err(err(&format!("read `{topic}`"), e)),
                Err(_) if targets.is_empty() => break,
                Err(_) => {
                    return Err(TransportError::new(
                        KIND,
                        ErrorKind::Timeout,
                        format!("reading `{topic}` stalled"),
                    ));
                }
            };
            if let Some(high) = targets.get(&m.partition()).copied() {
                if m.offset() + 1 >= high {
                    targets.remove(&m.partition());
                }
            }
            out.push(Read {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                payload: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
                headers: m.headers().map(|h| h.detach()),
                timestamp: m.timestamp().to_millis(),
            });
        }
        out.sort_by_key(|r| (r.partition, r.offset));
        Ok(out)
    }

    async fn replayed(&self) -> Result<HashSet<String>, TransportError> {
        let index = self.inner.config.replayed_topic();
        Ok(self
            .read_all(&index)
            .await?
            .into_iter()
            .filter_map(|r| r.key.and_then(|k| String::from_utf8(k).ok()))
            .collect())
    }

    fn parked(&self, r: &Read) -> Parked {
        let neutral = to_headers(r.headers.as_ref());
        let key = r
            .key
            .as_ref()
            .map(|k| String::from_utf8_lossy(k).into_owned());
        let message = Message::from_headers(
            self.inner.config.topic.clone(),
            key,
            neutral,
            r.payload.clone(),
        );
        let at = r
            .timestamp
            .and_then(|ms| u64::try_from(ms).ok())
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
        let mut parked = Parked::new(format!("{}:{}", r.partition, r.offset), message, at);
        understand_spring(&mut parked.envelope, r.headers.as_ref());
        if parked.message.id.is_none() {
            parked.message.id.clone_from(&parked.envelope.message_id);
        }
        parked
    }
}

pub(crate) fn fastrand_suffix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id())
}

#[async_trait]
impl ParkingLot for KafkaParkingLot {
    async fn browse(&self, limit: usize) -> Result<Vec<Parked>, TransportError> {
        let done = self.replayed().await?;
        let dlt = self.inner.config.dlt();
        Ok(self
            .read_all(&dlt)
            .await?
            .iter()
            .filter(|r| !done.contains(&format!("{}:{}", r.partition, r.offset)))
            .take(limit)
            .map(|r| self.parked(r))
            .collect())
    }

    async fn sweep(&self, selector: &mut dyn Selector) -> Result<(), TransportError> {
        let done = self.replayed().await?;
        let config = &self.inner.config;
        let records = self.read_all(&config.dlt()).await?;
        for r in &records {
            let id = format!("{}:{}", r.partition, r.offset);
            if done.contains(&id) {
                continue;
            }
            let parked = self.parked(r);
            match selector.choose(&parked).await {
                Choice::Keep => {}
                Choice::Stop => break,
                Choice::Move(headers) => {
                    let partition = parked.envelope.origin.partition;
                    let copy = for_copy(r.headers.as_ref(), &headers);
                    let mut moved = self
                        .inner
                        .produce(&config.topic, partition, r.key.as_deref(), &r.payload, copy)
                        .await;
                    if moved.is_ok() {
                        let replay = parked_replay_id(&headers);
                        let mark = OwnedHeaders::new().insert(Header {
                            key: "replay-id",
                            value: Some(replay.as_bytes()),
                        });
                        moved = self
                            .inner
                            .produce(&config.replayed_topic(), None, Some(id.as_bytes()), replay.as_bytes(), mark)
                            .await
                            .map_err(|e| {
                                TransportError::new(
                                    KIND,
                                    ErrorKind::Refused,
                                    format!("replayed {id}, but could not record it in the index (it may be replayed again): {e}"),
                                )
                            });
                    }
                    selector.moved(&parked, moved);
                }
            }
        }
        Ok(())
    }
}

fn parked_replay_id(headers: &parkway_core::Headers) -> String {
    headers
        .get(parkway_core::envelope::names::REPLAY_ID)
        .unwrap_or("replay")
        .to_owned()
}
