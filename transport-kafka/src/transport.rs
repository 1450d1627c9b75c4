//! [`KafkaTransport`]: connecting, the rebalance callbacks and the shared
//! state the pump (`pump.rs`) and the transport verbs (`verbs.rs`) work on.

use std::{
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, Ordering as AtomicOrdering},
    },
    time::Duration,
};

use parkway_core::{ErrorKind, Message, Ordering, RetryPolicy, TransportError};
use rdkafka::{
    ClientContext, TopicPartitionList,
    consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer},
    message::OwnedHeaders,
    producer::{FutureProducer, FutureRecord},
};
use tokio::{sync::Notify, task::JoinHandle};

use crate::{
    KIND, KafkaConfig, TierPlan, admin, commits, finishes::Finishes, headers::from_headers,
    parking::KafkaParkingLot, state::State, token::Token,
};

/// Rebalance callbacks: revoked partitions drop their in-flight state,
/// assigned ones start clean.
pub(crate) struct Ctx {
    state: Arc<Mutex<State>>,
    finishes: Arc<Finishes>,
    ready: Arc<Notify>,
    source: String,
}

impl ClientContext for Ctx {}

impl ConsumerContext for Ctx {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            // What finished here is committed before the partition goes,
            // so its new owner does not redo it.
            let finished: Vec<(String, i32, i64)> = {
                let mut s = lock(&self.state);
                // Queued finishes first: what finished here is committed.
                self.finishes.apply(&mut s, true);
                tpl.elements()
                    .iter()
                    .filter_map(|e| {
                        let next = s.revoke(e.topic(), e.partition())?.to_commit?;
                        Some((e.topic().to_owned(), e.partition(), next))
                    })
                    .collect()
            };
            commits::commit(consumer, &commits::list(finished), CommitMode::Sync);
            tracing::info!(partitions = tpl.count(), "partitions revoked");
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            // librdkafka keeps a partition's pause across a rebalance, but
            // its buffer here starts empty: start every assigned partition
            // unpaused, or one paused before would never be resumed.
            if let Err(e) = consumer.resume(tpl) {
                tracing::warn!(error = %e, "could not resume newly assigned partitions");
            }
            let mut s = lock(&self.state);
            // A re-assigned partition starts a new epoch: finishes of its
            // old records go the locked way, which refuses them.
            self.finishes.apply(&mut s, true);
            for e in tpl.elements() {
                s.assign(e.topic(), e.partition(), e.topic() != self.source);
            }
            tracing::info!(partitions = tpl.count(), "partitions assigned");
            self.ready.notify_waiters();
        }
    }
}

pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) struct Inner {
    pub(crate) config: KafkaConfig,
    pub(crate) plan: TierPlan,
    pub(crate) ordered: bool,
    pub(crate) consumer: Arc<StreamConsumer<Ctx>>,
    pub(crate) producer: FutureProducer,
    pub(crate) state: Arc<Mutex<State>>,
    /// Finishes queued without the state lock (see `finishes`).
    pub(crate) finishes: Arc<Finishes>,
    pub(crate) ready: Arc<Notify>,
    /// A consumer made room in a full source partition (the pump waits).
    pub(crate) drained: Notify,
    /// An offset was gathered for the committer (see `commits`).
    pub(crate) gathered: Notify,
    pub(crate) closed: AtomicBool,
    /// The group was joined and the pump started (see `start`).
    started: AtomicBool,
    /// Held while starting, so only one receive starts the transport.
    starting: tokio::sync::Mutex<()>,
    pump: Mutex<Option<JoinHandle<()>>>,
    /// The control-topic listener and the committer.
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// The Kafka transport of one source topic.
///
/// Cheap to clone: clones share the consumer and producer.
#[derive(Clone)]
pub struct KafkaTransport {
    pub(crate) inner: Arc<Inner>,
    pub(crate) lot: KafkaParkingLot,
}

impl std::fmt::Debug for KafkaTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaTransport")
            .field("config", &self.inner.config)
            .field("ordered", &self.inner.ordered)
            .finish_non_exhaustive()
    }
}

fn kafka_error(doing: &str, e: impl std::error::Error + Send + Sync + 'static) -> TransportError {
    TransportError::new(KIND, ErrorKind::Disconnected, format!("could not {doing}")).with_source(e)
}

impl KafkaTransport {
    /// Connects and creates (or verifies) the retry, dead-letter and replay
    /// topics for `policies`. The consumer group is joined on the first
    /// `receive`.
    pub async fn connect<'a>(
        config: KafkaConfig,
        policies: impl IntoIterator<Item = &'a RetryPolicy>,
    ) -> Result<Self, TransportError> {
        config.validate()?;
        let policies: Vec<&RetryPolicy> = policies.into_iter().collect();
        let plan = TierPlan::for_policies(policies.iter().copied());
        let ordered = policies.iter().any(|p| p.ordering() == Ordering::Ordered);
        let producer: FutureProducer = admin::client_config(&config)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .create()
            .map_err(|e| kafka_error("create the producer", e))?;
        admin::ensure(&config, &plan, &producer).await?;
        let state = Arc::new(Mutex::new(State::default()));
        let finishes = Arc::new(Finishes::default());
        let ready = Arc::new(Notify::new());
        let ctx = Ctx {
            state: state.clone(),
            finishes: finishes.clone(),
            ready: ready.clone(),
            source: config.topic.clone(),
        };
        let consumer: StreamConsumer<Ctx> = admin::client_config(&config)
            .set("group.id", &config.group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .create_with_context(ctx)
            .map_err(|e| kafka_error("create the consumer", e))?;
        let inner = Arc::new(Inner {
            config,
            plan,
            ordered,
            consumer: Arc::new(consumer),
            producer,
            state,
            finishes,
            ready,
            drained: Notify::new(),
            gathered: Notify::new(),
            closed: AtomicBool::new(false),
            started: AtomicBool::new(false),
            starting: tokio::sync::Mutex::new(()),
            pump: Mutex::new(None),
            tasks: Mutex::new(Vec::new()),
        });
        Ok(KafkaTransport {
            lot: KafkaParkingLot::new(inner.clone()),
            inner,
        })
    }

    /// Produces a new message to the source topic (the producer side).
    pub async fn publish(&self, msg: &Message) -> Result<(), TransportError> {
        let mut headers = msg.headers.clone();
        if let Some(id) = &msg.id {
            headers.insert(MESSAGE_ID, id.as_str());
        }
        if let Some(c) = &msg.correlation_id {
            headers.insert(CORRELATION_ID, c.as_str());
        }
        if let Some(t) = &msg.message_type {
            headers.insert(MESSAGE_TYPE, t.as_str());
        }
        let key = msg.key.as_ref().map(|k| k.as_bytes().to_vec());
        self.inner
            .produce(
                &self.inner.config.topic,
                None,
                key.as_deref(),
                &msg.body,
                from_headers(&headers),
            )
            .await
    }

    /// The settings this transport was built from.
    pub fn config(&self) -> &KafkaConfig {
        &self.inner.config
    }

    /// The source topic.
    pub fn topic(&self) -> String {
        self.inner.config.topic.clone()
    }

    /// Leaves the group and stops fetching; `receive` returns `Ok(None)`.
    pub async fn close(&self) {
        self.inner.closed.store(true, AtomicOrdering::SeqCst);
        self.inner.ready.notify_waiters();
        if let Some(p) = self
            .inner
            .pump
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            p.abort();
        }
        let tasks =
            std::mem::take(&mut *self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in tasks {
            t.abort();
        }
        // Commit what finished before leaving the group (a blocking call).
        let inner = self.inner.clone();
        let flushed = tokio::task::spawn_blocking(move || {
            let finished = inner.committable();
            commits::commit(
                inner.consumer.as_ref(),
                &commits::list(finished),
                CommitMode::Sync,
            );
        })
        .await;
        if let Err(e) = flushed {
            tracing::warn!(error = %e, "the final offset commit did not run; a restart redelivers those records");
        }
        self.inner.consumer.unsubscribe();
    }

    /// Deletes the retry, dead-letter and replay topics (and the source
    /// topic if `source_too`), for tests and teardown.
    pub async fn delete_topics(&self, source_too: bool) -> Result<(), TransportError> {
        admin::delete(&self.inner.config, &self.inner.plan, source_too).await
    }
}

/// Plain headers carrying a message's identity on Kafka (Kafka has no
/// message properties).
pub use parkway_core::transport::identity::{CORRELATION_ID, MESSAGE_ID, MESSAGE_TYPE};

impl Inner {
    /// Pauses or resumes fetching a partition. Call it with the state lock
    /// held, in the same critical section that sets `Partition::paused`:
    /// otherwise a pause and a resume decided in one order can reach
    /// librdkafka in the other, leaving a partition paused that the state
    /// says is flowing, for good. (librdkafka runs no callback here, so the
    /// lock cannot deadlock.)
    pub(crate) fn set_fetching(&self, topic: &str, partition: i32, fetching: bool) {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(topic, partition);
        let result = if fetching {
            self.consumer.resume(&tpl)
        } else {
            self.consumer.pause(&tpl)
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, topic, partition, fetching, "could not pause or resume fetching a partition");
        }
    }

    pub(crate) async fn produce(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        payload: &[u8],
        headers: OwnedHeaders,
    ) -> Result<(), TransportError> {
        let mut record = FutureRecord::<[u8], [u8]>::to(topic)
            .payload(payload)
            .headers(headers);
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(p) = partition {
            record = record.partition(p);
        }
        let send = self.producer.send(record, Duration::from_secs(0));
        match tokio::time::timeout(self.config.produce_timeout, send).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err((e, _))) => Err(TransportError::new(
                KIND,
                ErrorKind::Refused,
                format!("produce to `{topic}` failed"),
            )
            .with_source(e)),
            Err(_) => Err(TransportError::new(
                KIND,
                ErrorKind::Timeout,
                format!("no delivery report from `{topic}` in time"),
            )),
        }
    }

    /// Joins the group and starts fetching, on the first `receive`: a
    /// transport used only to produce or browse never takes partitions
    /// from the workers of its group.
    ///
    /// Asking the brokers for metadata and subscribing are blocking calls
    /// (the metadata wait is up to 5 s): they run on the blocking pool, so
    /// a worker thread of the runtime never stalls on them.
    pub(crate) async fn start(self: &Arc<Self>) -> Result<(), TransportError> {
        // Every receive asks; only the first few find it not started.
        if self.started.load(AtomicOrdering::Acquire) {
            return Ok(());
        }
        let _starting = self.starting.lock().await;
        if self.started.load(AtomicOrdering::Acquire) || self.closed.load(AtomicOrdering::SeqCst) {
            return Ok(());
        }
        let inner = self.clone();
        let subscribed = tokio::task::spawn_blocking(move || {
            let mut topics = vec![inner.config.topic.clone()];
            topics.extend(inner.plan.labels().map(|l| inner.config.tier_topic(l)));
            let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
            // Learn about tier topics created moments ago before
            // subscribing: discovering them later would cost a second
            // rebalance.
            if let Err(e) = inner.consumer.fetch_metadata(None, Duration::from_secs(5)) {
                tracing::warn!(error = %e, "could not refresh metadata before subscribing");
            }
            inner
                .consumer
                .subscribe(&refs)
                .map_err(|e| kafka_error("subscribe", e))
        })
        .await;
        subscribed.map_err(|e| {
            TransportError::new(KIND, ErrorKind::Disconnected, "subscribing was cut off")
                .with_source(e)
        })??;
        // Closed meanwhile: nothing to start.
        if self.closed.load(AtomicOrdering::SeqCst) {
            return Ok(());
        }
        *self.pump.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(tokio::spawn(crate::pump::run(self.clone())));
        self.started.store(true, AtomicOrdering::Release);
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks.push(tokio::spawn(crate::control::listen(self.clone())));
        tasks.push(tokio::spawn(commits::run(self.clone())));
        Ok(())
    }

    pub(crate) fn current(&self, token: &Token) -> bool {
        let s = lock(&self.state);
        s.get(&token.topic, token.partition)
            .is_some_and(|p| p.epoch == token.epoch)
    }
}

pub(crate) fn revoked() -> TransportError {
    TransportError::new(
        KIND,
        ErrorKind::Disconnected,
        "the record's partition was revoked; its new owner processes it from the last commit",
    )
}
