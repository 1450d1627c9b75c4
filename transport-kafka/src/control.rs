//! The control topic (`<topic>.control`): how an operator in another
//! process reaches a halted partition.
//!
//! A halted record lives in the memory of whichever worker holds its
//! partition, and Kafka will not let an outsider commit for a group with
//! live members. So operator actions travel through the broker itself: the
//! worker announces each halt on the control topic, the `parkway kafka`
//! commands write an action there, and the worker holding that partition
//! carries it out and writes back whether it did. Partition 0 carries
//! everything, so the log is one ordered story of halts and actions.
//!
//! Records are small JSON documents; a record that does not parse is
//! ignored (and logged), never fatal.

use std::{
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use parkway_core::{ErrorKind, TransportError};
use rdkafka::{
    Offset, TopicPartitionList,
    consumer::{Consumer, StreamConsumer},
    message::{Message as _, OwnedHeaders},
    producer::Producer as _,
};
use serde::{Deserialize, Serialize};

use crate::{
    HaltedRecord, KIND, KafkaTransport, admin,
    parking::fastrand_suffix,
    transport::{Inner, lock},
};

/// What an operator can do with a halted record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum OperatorAction {
    /// Run it again in place with a fresh budget.
    Resume,
    /// Park it in the dead-letter topic and let the partition continue.
    SkipToDlt,
}

impl std::fmt::Display for OperatorAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OperatorAction::Resume => "resume",
            OperatorAction::SkipToDlt => "skip-to-dlt",
        })
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum ControlRecord {
    Halted {
        topic: String,
        partition: i32,
        offset: i64,
        reason: Option<String>,
        since_ms: u64,
    },
    Command {
        id: String,
        action: OperatorAction,
        topic: String,
        partition: i32,
        offset: i64,
        operator: String,
    },
    Applied {
        id: String,
        ok: bool,
        detail: String,
    },
}

const PARTITION: i32 = 0;

fn err(doing: &str, e: impl std::error::Error + Send + Sync + 'static) -> TransportError {
    TransportError::new(KIND, ErrorKind::Disconnected, format!("could not {doing}")).with_source(e)
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

async fn write(inner: &Inner, record: &ControlRecord) -> Result<(), TransportError> {
    let json = serde_json::to_vec(record).map_err(|e| err("encode a control record", e))?;
    inner
        .produce(
            &inner.config.control_topic(),
            Some(PARTITION),
            None,
            &json,
            OwnedHeaders::new(),
        )
        .await
}

/// Announces a halt on the control topic, in the background: the halt
/// itself already holds, the notice only helps operators find it.
pub(crate) fn announce(inner: &Arc<Inner>, h: &HaltedRecord) {
    let inner = inner.clone();
    let record = ControlRecord::Halted {
        topic: h.topic.clone(),
        partition: h.partition,
        offset: h.offset,
        reason: h.reason.clone(),
        since_ms: millis(SystemTime::now()),
    };
    tokio::spawn(async move {
        if let Err(e) = write(&inner, &record).await {
            tracing::warn!(error = %e, "could not announce the halt on the control topic; `parkway kafka halted` will not list it");
        }
    });
}

fn reader(inner: &Inner, from: Offset) -> Result<StreamConsumer, TransportError> {
    let consumer: StreamConsumer = admin::client_config(&inner.config)
        .set("group.id", format!("parkway-control-{}", fastrand_suffix()))
        .set("enable.auto.commit", "false")
        // The control topic is nearly always empty: a short fetch wait
        // inherited from the worker's settings would poll it all the time.
        .set("fetch.wait.max.ms", "500")
        .create()
        .map_err(|e| err("create a control-topic reader", e))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&inner.config.control_topic(), PARTITION, from)
        .map_err(|e| err("assign the control topic", e))?;
    consumer
        .assign(&tpl)
        .map_err(|e| err("assign the control topic", e))?;
    Ok(consumer)
}

/// The worker side: carries out actions meant for partitions this
/// consumer holds, and answers each. Actions for partitions held elsewhere
/// are left to their holder.
pub(crate) async fn listen(inner: Arc<Inner>) {
    let consumer = match reader(&inner, Offset::End) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "operator actions cannot reach this worker: the control topic is unreadable");
            return;
        }
    };
    loop {
        let m = match consumer.recv().await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "control topic read failed");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let Some(ControlRecord::Command {
            id,
            action,
            topic,
            partition,
            offset,
            operator,
        }) = parse(m.payload())
        else {
            continue;
        };
        let held = lock(&inner.state).get(&topic, partition).is_some();
        if !held {
            continue;
        }
        let span =
            tracing::info_span!("parkway.operator", %action, %topic, partition, offset, %operator);
        let _guard = span.enter();
        let result = match action {
            OperatorAction::Resume => inner.resume_halted(&topic, partition, offset),
            OperatorAction::SkipToDlt => inner.skip_halted(&topic, partition, offset).await,
        };
        let (ok, detail) = match result {
            Ok(()) => (
                true,
                format!("{action} applied to {topic}/{partition}@{offset}"),
            ),
            Err(e) => (false, e.to_string()),
        };
        tracing::info!(ok, %detail, "operator action");
        if let Err(e) = write(&inner, &ControlRecord::Applied { id, ok, detail }).await {
            tracing::warn!(error = %e, "could not answer an operator action");
        }
    }
}

fn parse(payload: Option<&[u8]>) -> Option<ControlRecord> {
    let bytes = payload?;
    match serde_json::from_slice(bytes) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(error = %e, "ignoring a control record that does not parse");
            None
        }
    }
}

impl KafkaTransport {
    /// Operator action from any process: asks the worker holding
    /// `topic/partition` to resume or skip the record halted at `offset`,
    /// and waits up to `wait` for its answer. Returns the worker's report;
    /// fails with its reason if it refused, or with a timeout if no worker
    /// holding that partition answered.
    pub async fn request(
        &self,
        action: OperatorAction,
        at: (&str, i32, i64),
        operator: &str,
        wait: Duration,
    ) -> Result<String, TransportError> {
        let (topic, partition, offset) = at;
        let inner = &self.inner;
        let control = inner.config.control_topic();
        let (_, high) = inner
            .producer
            .client()
            .fetch_watermarks(&control, PARTITION, Duration::from_secs(10))
            .map_err(|e| err(&format!("read the watermarks of `{control}`"), e))?;
        let answers = reader(inner, Offset::Offset(high))?;
        let id = format!("{:x}-{:x}", fastrand_suffix(), fastrand::u64(..));
        let command = ControlRecord::Command {
            id: id.clone(),
            action,
            topic: topic.to_owned(),
            partition,
            offset,
            operator: operator.to_owned(),
        };
        write(inner, &command).await?;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let m = match tokio::time::timeout_at(deadline, answers.recv()).await {
                Ok(Ok(m)) => m,
                Ok(Err(e)) => return Err(err(&format!("read `{control}`"), e)),
                Err(_) => {
                    return Err(TransportError::new(
                        KIND,
                        ErrorKind::Timeout,
                        format!(
                            "no worker holding {topic}/{partition} answered within {}; is a worker of group `{}` running?",
                            humantime::format_duration(wait),
                            inner.config.group_id
                        ),
                    ));
                }
            };
            match parse(m.payload()) {
                Some(ControlRecord::Applied {
                    id: got,
                    ok,
                    detail,
                }) if got == id => {
                    return if ok {
                        Ok(detail)
                    } else {
                        Err(TransportError::new(KIND, ErrorKind::Refused, detail))
                    };
                }
                _ => continue,
            }
        }
    }

    /// Halts announced on the control topic that no operator action has
    /// released yet, oldest first: what `parkway kafka halted` lists.
    pub async fn announced_halts(&self) -> Result<Vec<HaltedRecord>, TransportError> {
        let records = self
            .lot
            .read_all(&self.inner.config.control_topic())
            .await?;
        let mut open: Vec<(HaltedRecord, u64)> = Vec::new();
        let mut commands = Vec::new();
        for r in records.iter().filter(|r| r.partition == PARTITION) {
            match parse(Some(&r.payload)) {
                Some(ControlRecord::Halted {
                    topic,
                    partition,
                    offset,
                    reason,
                    since_ms,
                }) => {
                    open.retain(|(h, _)| (h.topic.as_str(), h.partition) != (&topic, partition));
                    let halted = HaltedRecord {
                        topic,
                        partition,
                        offset,
                        reason,
                        halted_for: Duration::ZERO,
                    };
                    open.push((halted, since_ms));
                }
                Some(ControlRecord::Command {
                    id,
                    topic,
                    partition,
                    offset,
                    ..
                }) => commands.push((id, topic, partition, offset)),
                Some(ControlRecord::Applied { id, ok: true, .. }) => {
                    if let Some((_, t, p, o)) = commands.iter().find(|c| c.0 == id) {
                        open.retain(|(h, _)| (&h.topic, h.partition, h.offset) != (t, *p, *o));
                    }
                }
                _ => {}
            }
        }
        let now = millis(SystemTime::now());
        Ok(open
            .into_iter()
            .map(|(mut h, since)| {
                h.halted_for = Duration::from_millis(now.saturating_sub(since));
                h
            })
            .collect())
    }
}
