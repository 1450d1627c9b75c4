//! Carrying out a settlement with SQS's own means.
//!
//! - **Ack / discard**: `DeleteMessageBatch` (the entry's own result).
//! - **Retry, visibility mode**: `ChangeMessageVisibility(delay)` on the
//!   received message — no copy; the envelope goes to the [`crate::memo`].
//! - **Retry, resend mode**: a copy with the updated envelope and
//!   `DelaySeconds`, then the original is deleted.
//! - **Park**: a copy to the DLQ with the envelope, then the original is
//!   deleted — at once, not after `maxReceiveCount` wasted receives.
//! - **Release**: visibility 0, remembered as a receive that spent no
//!   attempt.
//!
//! The original is deleted only after SQS accepted its copy; if anything
//! fails the delivery goes back to the worker unsettled. Visibility and
//! `DelaySeconds` are whole seconds, and SQS (and its emulators) may return
//! a message up to a second after it became visible: a retry is asked for
//! [`LEAD`] less than its delay, rounded down, and the worker waits out the
//! rest from the envelope's due time — exact to milliseconds.

use std::time::Duration;

use parkway_core::{ErrorKind, Headers, Settle, TransportError};
use tokio::time::Instant;

use crate::{
    KIND, RetryMode,
    attributes::{DEDUP_KEY, MAX_MESSAGE_BYTES, for_copy, size},
    batch::Op,
    client::error,
    config::{MAX_SEND_DELAY, MAX_VISIBILITY},
    inner::{Inner, Token},
};

/// Where a copy goes.
pub(crate) enum Target<'a> {
    /// The source queue (retry by re-send, replay).
    Source { delay: Duration, dedup: &'a str },
    /// The dead-letter queue.
    DeadLetter,
}

/// How much earlier than its delay a retry is made visible (see above).
pub(crate) const LEAD: Duration = Duration::from_secs(1);

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX)
}

impl Inner {
    pub(crate) async fn settle_token(
        &self,
        token: &Token,
        action: &Settle,
    ) -> Result<(), TransportError> {
        match action {
            Settle::Ack | Settle::Discard => {
                self.batcher.submit(&token.receipt, Op::Delete).await?;
                self.memo.forget(&token.sqs_id);
                Ok(())
            }
            Settle::Release => {
                self.change_visibility(token, Duration::ZERO).await?;
                self.memo.released(&token.sqs_id);
                Ok(())
            }
            Settle::Retry { delay, headers } => match self.config.retry_mode {
                RetryMode::Visibility => {
                    let before = self.memo.retried(&token.sqs_id, headers);
                    let wait = delay.saturating_sub(LEAD).min(MAX_VISIBILITY);
                    let result = self.change_visibility(token, wait).await;
                    if result.is_err() {
                        self.memo.restore(&token.sqs_id, before);
                    }
                    result
                }
                RetryMode::Resend => {
                    let dedup = fresh_dedup(&token.sqs_id);
                    let target = Target::Source {
                        delay: delay.saturating_sub(LEAD).min(MAX_SEND_DELAY),
                        dedup: &dedup,
                    };
                    self.send_copy(
                        token.body.as_str(),
                        token.attributes.as_ref(),
                        headers,
                        token.group.as_deref(),
                        target,
                        &[],
                    )
                    .await?;
                    self.batcher.submit(&token.receipt, Op::Delete).await?;
                    self.memo.forget(&token.sqs_id);
                    Ok(())
                }
            },
            Settle::Park { headers } => {
                let extra: Vec<(&str, &str)> = token
                    .dedup
                    .as_deref()
                    .map(|d| (DEDUP_KEY, d))
                    .into_iter()
                    .collect();
                self.send_copy(
                    token.body.as_str(),
                    token.attributes.as_ref(),
                    headers,
                    token.group.as_deref(),
                    Target::DeadLetter,
                    &extra,
                )
                .await?;
                self.batcher.submit(&token.receipt, Op::Delete).await?;
                self.memo.forget(&token.sqs_id);
                Ok(())
            }
            other => Err(TransportError::new(
                KIND,
                ErrorKind::Unsupported,
                format!("settlement {}", other.name()),
            )),
        }
    }

    /// Sets a received message's visibility to `wait` (whole seconds
    /// below). Its lease ends first, under the shared gate, so no renewal
    /// can land after this change; if the change fails the lease is back.
    pub(crate) async fn change_visibility(
        &self,
        token: &Token,
        wait: Duration,
    ) -> Result<(), TransportError> {
        let _shared = self.leases.gate.read().await;
        self.leases.remove(token.lease);
        let result = self
            .batcher
            .submit(&token.receipt, Op::Visibility(secs(wait)))
            .await;
        if result.is_err() {
            self.leases
                .extended(token.lease, &token.receipt, Instant::now());
        }
        result
    }

    /// Sends a copy of a message — the body byte for byte, the original
    /// attributes, the envelope from `headers` — and returns once SQS
    /// accepted it.
    pub(crate) async fn send_copy(
        &self,
        body: &str,
        attributes: Option<&crate::attributes::Attributes>,
        headers: &Headers,
        group: Option<&str>,
        target: Target<'_>,
        extra: &[(&str, &str)],
    ) -> Result<(), TransportError> {
        let attrs = for_copy(attributes, headers, extra)?;
        let bytes = size(body, &attrs);
        if bytes > MAX_MESSAGE_BYTES {
            return Err(TransportError::new(
                KIND,
                ErrorKind::Refused,
                format!("the copy would be {bytes} bytes; SQS allows {MAX_MESSAGE_BYTES}"),
            ));
        }
        let fifo = self.config.is_fifo();
        let (url, what) = match target {
            Target::Source { .. } => (&self.queues.source_url, "send a copy to the source queue"),
            Target::DeadLetter => (&self.queues.dlq_url, "send a copy to the dead-letter queue"),
        };
        let mut req = self
            .client
            .send_message()
            .queue_url(url)
            .message_body(body)
            .set_message_attributes(Some(attrs));
        match target {
            Target::Source { delay, dedup } => {
                if fifo {
                    req = req.message_deduplication_id(dedup);
                } else if !delay.is_zero() {
                    req = req.delay_seconds(secs(delay));
                }
            }
            Target::DeadLetter => {
                if fifo {
                    req = req.message_deduplication_id(fresh_dedup(body_id(headers)));
                }
            }
        }
        if fifo {
            req = req.message_group_id(group.unwrap_or(DEFAULT_GROUP));
        }
        req.send().await.map_err(|e| error(what, e))?;
        Ok(())
    }
}

/// The group of a FIFO message that had none (never from SQS itself).
pub(crate) const DEFAULT_GROUP: &str = "parkway";

fn body_id(headers: &Headers) -> &str {
    headers
        .get(parkway_core::envelope::names::MESSAGE_ID)
        .unwrap_or("parked")
}

/// A deduplication id no earlier send used: a copy must never be taken for
/// a duplicate of the message it copies (SQS would accept it and drop it).
pub(crate) fn fresh_dedup(base: &str) -> String {
    let base: String = base
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(80)
        .collect();
    format!("{base}.{:016x}", fastrand::u64(..))
}
