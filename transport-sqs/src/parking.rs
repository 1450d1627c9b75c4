//! The dead-letter queue as a [`ParkingLot`].
//!
//! An SQS queue can only be read by receiving, which hides what it returns.
//! Browsing therefore receives with a visibility timeout and makes every
//! message visible again at the end (receive counts on the DLQ grow; the DLQ
//! has no redrive policy of its own, so nothing moves). A sweep receives the
//! same way: a moved message is sent to the source queue with its replay
//! envelope and deleted from the DLQ only once SQS accepted the copy; kept
//! ones stay hidden until the pass ends (so one pass sees each once) and are
//! then made visible at once.
//!
//! Messages that reached the DLQ through the redrive policy (a worker that
//! crashed or was killed while handling them) carry no park of ours: they
//! are shown with reason `BROKER_MAX_RECEIVE_COUNT` and the attempts the
//! policy allowed, so they can be filtered and redriven like the rest.

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use async_trait::async_trait;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, Message as SqsMessage, MessageSystemAttributeName,
};
use parkway_core::{
    Choice, Envelope, FailureClass, Parked, ParkingLot, Reason, Selector, TransportError,
};

use crate::{
    client::{build_error, error},
    inner::{Inner, System, message, rfc3339},
    settle::{Target, fresh_dedup},
};

/// How long browsing or a sweep keeps what it received hidden at most.
const HIDE_SECS: i32 = 300;
/// The reason shown for messages the redrive policy moved by itself.
pub const NATIVE_REASON: &str = "BROKER_MAX_RECEIVE_COUNT";

#[derive(Clone)]
pub(crate) struct SqsParkingLot {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SqsParkingLot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsParkingLot")
            .field("queue", &self.inner.queues.dlq_url)
            .finish()
    }
}

/// One received DLQ message.
struct Read {
    message: SqsMessage,
    receipt: String,
    parked: Parked,
}

impl SqsParkingLot {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        SqsParkingLot { inner }
    }

    /// Up to ten messages, hidden for [`HIDE_SECS`]; empty when the DLQ has
    /// nothing visible (a one-second long poll, so SQS asks every server).
    async fn receive(&self, max: usize) -> Result<Vec<Read>, TransportError> {
        let out = self
            .inner
            .client
            .receive_message()
            .queue_url(&self.inner.queues.dlq_url)
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .wait_time_seconds(1)
            .visibility_timeout(HIDE_SECS)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| error("receive from the dead-letter queue", e))?;
        let mut reads: Vec<Read> = out
            .messages
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| {
                let receipt = m.receipt_handle()?.to_owned();
                let parked = self.parked(&m);
                Some(Read {
                    message: m,
                    receipt,
                    parked,
                })
            })
            .collect();
        reads.sort_by_key(|r| r.parked.parked_at);
        Ok(reads)
    }

    fn parked(&self, m: &SqsMessage) -> Parked {
        let sys = System::of(m);
        let msg = message(&self.inner.config.queue_name(), m, &sys);
        let at = sys.sent_ms.map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
        let mut parked = Parked::new(m.message_id().unwrap_or_default(), msg, at);
        if sys.dead_letter_source.is_some() || parked.envelope.reason.is_none() {
            self.understand_native(&mut parked.envelope, &sys);
        }
        if parked.message.id.is_none() {
            parked.message.id.clone_from(&parked.envelope.message_id);
        }
        parked
    }

    /// Fills the envelope of a message the redrive policy moved.
    fn understand_native(&self, env: &mut Envelope, sys: &System) {
        let max = self.inner.queues.max_receive_count;
        env.reason = Some(Reason::from_static(NATIVE_REASON));
        env.class = Some(FailureClass::Unknown);
        env.attempts = env.attempts.max(max);
        if env.origin.queue.is_none() {
            env.origin.queue = sys
                .dead_letter_source
                .as_deref()
                .map(|arn| arn.rsplit(':').next().unwrap_or(arn).to_owned())
                .or_else(|| Some(self.inner.config.queue_name()));
        }
        if env.first_failure_at.is_none() {
            env.first_failure_at = sys
                .first_receive_ms
                .and_then(|ms| humantime::parse_rfc3339_weak(&rfc3339(ms)).ok());
        }
        if env.last_error.is_none() {
            env.last_error = Some(format!(
                "moved to the dead-letter queue by the redrive policy after {max} receives (the worker crashed, was killed or never settled it)"
            ));
        }
    }

    /// Makes received messages visible again, ten per call.
    async fn unhide(&self, receipts: &[String]) -> Result<(), TransportError> {
        for chunk in receipts.chunks(10) {
            let mut req = self
                .inner
                .client
                .change_message_visibility_batch()
                .queue_url(&self.inner.queues.dlq_url);
            for (i, r) in chunk.iter().enumerate() {
                let entry = ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(r)
                    .visibility_timeout(0)
                    .build()
                    .map_err(|e| build_error("build a visibility entry", e))?;
                req = req.entries(entry);
            }
            let out = req
                .send()
                .await
                .map_err(|e| error("make parked messages visible again", e))?;
            if !out.failed().is_empty() {
                tracing::warn!(
                    failed = out.failed().len(),
                    "some parked messages stay hidden until their browse timeout ends"
                );
            }
        }
        Ok(())
    }

    /// Sends one parked message back to the source and deletes it.
    async fn replay(
        &self,
        read: &Read,
        headers: &parkway_core::Headers,
    ) -> Result<(), TransportError> {
        let sys = System::of(&read.message);
        let dedup = fresh_dedup(read.message.message_id().unwrap_or("replay"));
        self.inner
            .send_copy(
                read.message.body().unwrap_or_default(),
                read.message.message_attributes(),
                headers,
                sys.group.as_deref(),
                Target::Source {
                    delay: Duration::ZERO,
                    dedup: &dedup,
                },
                &[],
            )
            .await?;
        self.inner
            .client
            .delete_message()
            .queue_url(&self.inner.queues.dlq_url)
            .receipt_handle(&read.receipt)
            .send()
            .await
            .map_err(|e| error("delete a replayed message from the dead-letter queue (it is now in both queues)", e))?;
        Ok(())
    }
}

#[async_trait]
impl ParkingLot for SqsParkingLot {
    #[tracing::instrument(name = "parkway.sqs.browse", skip_all, fields(dead_letter_queue = %self.inner.queues.dlq_url))]
    async fn browse(&self, limit: usize) -> Result<Vec<Parked>, TransportError> {
        let mut out: Vec<Parked> = Vec::new();
        let mut receipts = Vec::new();
        let mut seen = HashSet::new();
        let result = async {
            while out.len() < limit {
                let reads = self.receive(limit - out.len()).await?;
                if reads.is_empty() || reads.iter().all(|r| seen.contains(&r.parked.id)) {
                    receipts.extend(reads.into_iter().map(|r| r.receipt));
                    break;
                }
                for r in reads {
                    receipts.push(r.receipt);
                    if seen.insert(r.parked.id.clone()) {
                        out.push(r.parked);
                    }
                }
            }
            Ok::<(), TransportError>(())
        }
        .await;
        let shown = self.unhide(&receipts).await;
        result?;
        shown?;
        out.sort_by_key(|p| p.parked_at.unwrap_or(SystemTime::UNIX_EPOCH));
        Ok(out)
    }

    #[tracing::instrument(name = "parkway.sqs.sweep", skip_all, fields(dead_letter_queue = %self.inner.queues.dlq_url))]
    async fn sweep(&self, selector: &mut dyn Selector) -> Result<(), TransportError> {
        let mut kept = Vec::new();
        let mut seen = HashSet::new();
        let result = async {
            'pass: loop {
                let reads = self.receive(10).await?;
                if reads.is_empty() || reads.iter().all(|r| seen.contains(&r.parked.id)) {
                    kept.extend(reads.into_iter().map(|r| r.receipt));
                    break;
                }
                let mut reads = reads.into_iter();
                while let Some(r) = reads.next() {
                    if !seen.insert(r.parked.id.clone()) {
                        kept.push(r.receipt);
                        continue;
                    }
                    match selector.choose(&r.parked).await {
                        Choice::Keep => kept.push(r.receipt),
                        Choice::Stop => {
                            kept.push(r.receipt);
                            kept.extend(reads.map(|r| r.receipt));
                            break 'pass;
                        }
                        Choice::Move(headers) => {
                            let moved = self.replay(&r, &headers).await;
                            if moved.is_err() {
                                kept.push(r.receipt.clone());
                            }
                            selector.moved(&r.parked, moved);
                        }
                    }
                }
            }
            Ok::<(), TransportError>(())
        }
        .await;
        let shown = self.unhide(&kept).await;
        result?;
        shown
    }
}
