//! Native bulk redrive: SQS's message-move tasks.
//!
//! Why both this and the filtered redrive? A move task runs inside SQS, at
//! up to 500 messages a second, with no worker involved — the tool for
//! "the dependency is back, move everything". It cannot filter, and it
//! moves messages as they are: their envelopes keep the attempts they had,
//! so a message that fails again after a native move parks at once. The
//! filtered redrive (core's `redrive()` over the parking lot) selects, paces,
//! canaries and gives a fresh budget with replay headers.

use parkway_core::{ErrorKind, TransportError};

use crate::{KIND, SqsTransport, client::error};

/// SQS's highest move rate.
pub const MAX_MOVE_RATE: u32 = 500;

/// A move task's progress, as `ListMessageMoveTasks` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveTask {
    /// The handle to cancel it with (only while it runs).
    pub handle: Option<String>,
    /// `RUNNING`, `COMPLETED`, `CANCELLING`, `CANCELLED` or `FAILED`.
    pub status: String,
    /// Messages moved so far.
    pub moved: i64,
    /// Messages to move when it started, if known.
    pub to_move: Option<i64>,
    /// Why it failed, if it did.
    pub failure: Option<String>,
    /// Start time, epoch milliseconds.
    pub started_at_ms: i64,
}

impl MoveTask {
    /// Whether the task has ended (completed, cancelled or failed).
    pub fn is_finished(&self) -> bool {
        matches!(self.status.as_str(), "COMPLETED" | "CANCELLED" | "FAILED")
    }
}

impl SqsTransport {
    /// Starts moving every message in the DLQ back to the source queue, at
    /// most `rate` per second (≤ 500; `None` lets SQS choose). Returns the
    /// task handle.
    #[tracing::instrument(name = "parkway.sqs.start_move_task", skip(self))]
    pub async fn start_move_task(&self, rate: Option<u32>) -> Result<String, TransportError> {
        if rate.is_some_and(|r| r == 0 || r > MAX_MOVE_RATE) {
            return Err(TransportError::new(
                KIND,
                ErrorKind::Config,
                format!("a move task's rate must be 1–{MAX_MOVE_RATE} messages per second"),
            ));
        }
        let q = &self.inner.queues;
        let mut req = self
            .inner
            .client
            .start_message_move_task()
            .source_arn(&q.dlq_arn)
            .destination_arn(&q.source_arn);
        if let Some(r) = rate {
            req = req.max_number_of_messages_per_second(i32::try_from(r).unwrap_or(500));
        }
        let out = req
            .send()
            .await
            .map_err(|e| error("start a message move task", e))?;
        tracing::info!(dead_letter_queue = %q.dlq_url, "message move task started");
        out.task_handle().map(str::to_owned).ok_or_else(|| {
            TransportError::new(KIND, ErrorKind::Refused, "SQS returned no move task handle")
        })
    }

    /// The DLQ's recent move tasks, newest first (SQS keeps the last ten).
    pub async fn move_tasks(&self) -> Result<Vec<MoveTask>, TransportError> {
        let out = self
            .inner
            .client
            .list_message_move_tasks()
            .source_arn(&self.inner.queues.dlq_arn)
            .max_results(10)
            .send()
            .await
            .map_err(|e| error("list message move tasks", e))?;
        Ok(out
            .results()
            .iter()
            .map(|r| MoveTask {
                handle: r.task_handle().map(str::to_owned),
                status: r.status().unwrap_or("UNKNOWN").to_owned(),
                moved: r.approximate_number_of_messages_moved(),
                to_move: r.approximate_number_of_messages_to_move(),
                failure: r.failure_reason().map(str::to_owned),
                started_at_ms: r.started_timestamp(),
            })
            .collect())
    }

    /// Cancels a running move task; returns the messages moved so far.
    #[tracing::instrument(name = "parkway.sqs.cancel_move_task", skip_all)]
    pub async fn cancel_move_task(&self, handle: &str) -> Result<i64, TransportError> {
        let out = self
            .inner
            .client
            .cancel_message_move_task()
            .task_handle(handle)
            .send()
            .await
            .map_err(|e| error("cancel a message move task", e))?;
        Ok(out.approximate_number_of_messages_moved())
    }
}
