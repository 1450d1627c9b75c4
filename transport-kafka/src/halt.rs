//! Halted partitions and the operator actions that release them.
//!
//! A ledger cannot skip a transaction it failed to apply, and it cannot
//! apply the next one first either. So when a pause-partition policy with
//! `on_exhausted = "halt"` spends its budget, only that partition stops:
//! the record stays in flight (nothing behind it runs, the committed offset
//! cannot pass it, a crash or rebalance redelivers it), the partition is
//! paused, `parkway_halted_partitions` counts it, and an error names topic,
//! partition and offset. The other partitions keep flowing.
//!
//! It waits there for an operator: [`KafkaTransport::resume`] runs it again
//! in place with a fresh budget (the downstream was fixed), and
//! [`KafkaTransport::skip_to_dlt`] parks it in the dead-letter topic with
//! its final envelope and lets the partition go on (breaking order for that
//! key, on purpose). Operators in another process reach these through the
//! control topic (see `control`).

use std::{
    fmt,
    time::{Duration, SystemTime},
};

use parkway_core::{Envelope, ErrorKind, Message, TransportError, envelope::Headers};

use crate::{
    KIND, KafkaTransport,
    headers::copy_of,
    state::{Halted, Partition},
    token::Token,
    transport::{Inner, lock},
};

/// Where a halted record sits, and why it halted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HaltedRecord {
    /// Topic (the source topic, or a retry tier in retry-topic mode).
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset of the halted record; nothing at or past it is committed.
    pub offset: i64,
    /// The reason code of the last failure.
    pub reason: Option<String>,
    /// How long it has been halted.
    pub halted_for: Duration,
}

impl fmt::Display for HaltedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}@{} ({}, halted {})",
            self.topic,
            self.partition,
            self.offset,
            self.reason.as_deref().unwrap_or("no reason"),
            humantime::format_duration(Duration::from_secs(self.halted_for.as_secs()))
        )
    }
}

fn view(topic: &str, partition: i32, h: &Halted) -> HaltedRecord {
    HaltedRecord {
        topic: topic.to_owned(),
        partition,
        offset: h.record.offset,
        reason: h.reason.clone(),
        halted_for: SystemTime::now()
            .duration_since(h.since)
            .unwrap_or_default(),
    }
}

fn not_halted(topic: &str, partition: i32, offset: i64, held: &[HaltedRecord]) -> TransportError {
    let held: Vec<String> = held.iter().map(ToString::to_string).collect();
    TransportError::new(
        KIND,
        ErrorKind::Config,
        format!(
            "no record of this consumer is halted at {topic}/{partition}@{offset}; halted here: {}",
            if held.is_empty() {
                "none".to_owned()
            } else {
                held.join(", ")
            }
        ),
    )
}

impl Inner {
    /// Keeps a record in flight and pauses its partition until an operator
    /// acts.
    pub(crate) fn halt(
        &self,
        token: &Token,
        message: &Message,
        headers: &Headers,
    ) -> Result<HaltedRecord, TransportError> {
        let reason = Envelope::decode(headers).reason.map(|r| r.to_string());
        let held;
        {
            let mut s = lock(&self.state);
            let Some(p) = s.get_mut(&token.topic, token.partition) else {
                return Err(crate::transport::revoked());
            };
            if p.epoch != token.epoch {
                return Err(crate::transport::revoked());
            }
            let halted = Halted {
                record: token.record(message),
                headers: headers.clone(),
                reason: reason.clone(),
                since: SystemTime::now(),
            };
            held = view(&token.topic, token.partition, &halted);
            p.halted = Some(halted);
            // Pause-partition mode: nothing behind it may run, so stop
            // fetching too. In retry-topic mode the others flow; only the
            // commit waits.
            if self.ordered && !p.paused {
                p.paused = true;
                self.set_fetching(&token.topic, token.partition, false);
            }
            metrics::gauge!("parkway_halted_partitions", "transport" => KIND)
                .set(s.halted().count() as f64);
        }
        tracing::error!(
            topic = %token.topic,
            partition = token.partition,
            offset = token.offset,
            reason = reason.as_deref().unwrap_or("-"),
            "partition halted: waiting for an operator to resume it or skip the record to the dead-letter topic"
        );
        Ok(held)
    }

    /// Every record halted in the partitions this consumer holds.
    pub(crate) fn halted_records(&self) -> Vec<HaltedRecord> {
        let s = lock(&self.state);
        s.halted()
            .map(|h| view(&h.record.topic, h.record.partition, h))
            .collect()
    }

    /// The halt at `topic/partition@offset` and its partition's epoch, or
    /// an error listing what is halted.
    fn find_halt(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(Halted, u64), TransportError> {
        let mut s = lock(&self.state);
        let found = s.get_mut(topic, partition).and_then(|p| match &p.halted {
            Some(h) if h.record.offset == offset => Some((h.clone(), p.epoch)),
            _ => None,
        });
        match found {
            Some(found) => Ok(found),
            None => {
                let held: Vec<HaltedRecord> = s
                    .halted()
                    .map(|h| view(&h.record.topic, h.record.partition, h))
                    .collect();
                Err(not_halted(topic, partition, offset, &held))
            }
        }
    }

    /// Takes the halt off a partition still in `epoch` and lets `then`
    /// settle the record there.
    fn lift_halt<T>(
        &self,
        topic: &str,
        partition: i32,
        epoch: u64,
        then: impl FnOnce(&mut Partition) -> T,
    ) -> Result<T, TransportError> {
        let mut s = lock(&self.state);
        let Some(p) = s.get_mut(topic, partition).filter(|p| p.epoch == epoch) else {
            return Err(crate::transport::revoked());
        };
        p.halted = None;
        if p.paused {
            p.paused = false;
            self.set_fetching(topic, partition, true);
        }
        let out = then(p);
        metrics::gauge!("parkway_halted_partitions", "transport" => KIND)
            .set(s.halted().count() as f64);
        Ok(out)
    }

    /// Runs the halted record again, in place, with the budget its own
    /// headers carry (the in-place attempts were never written to Kafka).
    pub(crate) fn resume_halted(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(), TransportError> {
        let (halted, epoch) = self.find_halt(topic, partition, offset)?;
        self.lift_halt(topic, partition, epoch, |p| p.release(halted.record))?;
        tracing::warn!(
            topic,
            partition,
            offset,
            "halted record resumed by an operator"
        );
        self.ready.notify_one();
        Ok(())
    }

    /// Parks the halted record in the dead-letter topic with its final
    /// envelope, then lets the partition go on past it.
    pub(crate) async fn skip_halted(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(), TransportError> {
        let (halted, epoch) = self.find_halt(topic, partition, offset)?;
        let r = &halted.record;
        let copy = copy_of(r.raw_headers.as_ref(), &halted.headers);
        self.produce(
            &self.config.dlt(),
            Some(r.partition),
            r.key.as_deref(),
            &r.payload,
            copy,
        )
        .await?;
        // If the partition moved meanwhile, its new owner runs the record
        // once more (at least once, never lost).
        let next = self.lift_halt(topic, partition, epoch, |p| p.finish(offset))?;
        if let Some(next) = next {
            self.commit(topic, partition, next);
        }
        tracing::warn!(
            topic,
            partition,
            offset,
            dlt = %self.config.dlt(),
            "halted record skipped to the dead-letter topic by an operator; order is broken for its key"
        );
        self.ready.notify_one();
        Ok(())
    }
}

impl KafkaTransport {
    /// Records halted in the partitions this transport's consumer holds.
    pub fn halted(&self) -> Vec<HaltedRecord> {
        self.inner.halted_records()
    }

    /// Operator action: run the record halted at `topic/partition@offset`
    /// again, in place, with a fresh budget. Fails, naming what is halted,
    /// if no record of this consumer is halted there.
    pub fn resume(&self, topic: &str, partition: i32, offset: i64) -> Result<(), TransportError> {
        self.inner.resume_halted(topic, partition, offset)
    }

    /// Operator action: park the record halted at `topic/partition@offset`
    /// in the dead-letter topic and let its partition continue. Nothing is
    /// committed past it until the dead-letter copy is accepted.
    pub async fn skip_to_dlt(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(), TransportError> {
        self.inner.skip_halted(topic, partition, offset).await
    }
}
