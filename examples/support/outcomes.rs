//! What happened to each message, from the worker's observer: handled how
//! often, retried how often, and how it ended.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use parkway::{Decision, Step};
use tokio::sync::Notify;

/// How a message's lifecycle ended (so far).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Not yet settled for good.
    Pending,
    /// Succeeded and acknowledged.
    Acked,
    /// Acknowledged as a duplicate.
    Duplicate,
    /// Parked.
    Parked,
    /// Discarded.
    Discarded,
}

/// One message's record.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Handler runs.
    pub handled: u32,
    /// Retries scheduled (local or broker).
    pub retried: u32,
    /// The reason of the last failure, if any.
    pub last_reason: Option<String>,
    /// How it ended.
    pub end: End,
}

/// Outcomes per message id, fed by the worker's observer.
#[derive(Debug, Clone, Default)]
pub struct Outcomes {
    inner: Arc<Mutex<BTreeMap<String, Outcome>>>,
    changed: Arc<Notify>,
}

impl Outcomes {
    /// Records one step (pass this to `WorkerBuilder::observer`).
    pub fn record(&self, step: &Step) {
        let id = step.message_id.clone().unwrap_or_else(|| "-".to_owned());
        let Ok(mut map) = self.inner.lock() else {
            return;
        };
        let o = map.entry(id).or_insert(Outcome {
            handled: 0,
            retried: 0,
            last_reason: None,
            end: End::Pending,
        });
        o.handled += 1;
        if let Some((_, reason)) = &step.failure {
            o.last_reason = Some(reason.to_string());
        }
        o.end = match (&step.failure, &step.decision) {
            (None, _) => End::Acked,
            (
                Some(_),
                Some(Decision::RetryLater(_) | Decision::RetryLocal(_) | Decision::Pause(_)),
            ) => {
                o.retried += 1;
                End::Pending
            }
            (Some(_), Some(Decision::Park(_))) => End::Parked,
            (Some(_), Some(Decision::Discard(_))) => End::Discarded,
            (Some(_), Some(Decision::Ack)) => End::Duplicate,
            _ => End::Pending,
        };
        drop(map);
        self.changed.notify_waiters();
    }

    /// A copy of the records.
    pub fn snapshot(&self) -> BTreeMap<String, Outcome> {
        self.inner.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// How many messages have ended.
    pub fn ended(&self) -> usize {
        self.snapshot()
            .values()
            .filter(|o| o.end != End::Pending)
            .count()
    }

    /// Waits until `n` messages have ended, or `within` passes (`false`).
    pub async fn wait_ended(&self, n: usize, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.changed.notified();
            if self.ended() >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.ended() >= n;
            }
        }
    }

    /// Prints one line per message: handled, retried, the end and reason.
    pub fn print(&self) {
        println!(
            "  {:<18} {:>7} {:>7}  {:<10} LAST FAILURE",
            "MESSAGE", "HANDLED", "RETRIED", "OUTCOME"
        );
        for (id, o) in self.snapshot() {
            println!(
                "  {:<18} {:>7} {:>7}  {:<10} {}",
                id,
                o.handled,
                o.retried,
                format!("{:?}", o.end).to_lowercase(),
                o.last_reason.as_deref().unwrap_or("-")
            );
        }
    }
}
