//! Long polls that keep a small buffer of received messages.
//!
//! Why pollers and a buffer instead of a receive per `receive()` call? A
//! long poll fetches up to ten messages and may wait 20 s for the first;
//! the worker asks for one delivery at a time from many consumers. A few
//! pollers (`pollers`) keep fetching batches of ten while there is room —
//! at most `max_in_flight` messages received and not settled, counted by a
//! semaphore whose permits the deliveries' tokens return — and `receive()`
//! only takes from the buffer. Buffered messages hold leases like handled
//! ones, so waiting in the buffer never lets them reappear.

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex, MutexGuard, Weak,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use aws_sdk_sqs::types::MessageSystemAttributeName;
use parkway_core::{Delivery, TransportError};
use tokio::{sync::Notify, task::JoinHandle};

use crate::{batch::MAX_BATCH, client::error, inner::Inner};

/// The buffer and the pollers filling it.
#[derive(Debug, Default)]
pub(crate) struct Intake {
    buffer: Mutex<VecDeque<Delivery>>,
    pub(crate) ready: Notify,
    failure: Mutex<Option<TransportError>>,
    pollers: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) closed: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Intake {
    /// Starts the pollers if they are not running.
    pub(crate) fn start(&self, inner: &Arc<Inner>) {
        let mut pollers = lock(&self.pollers);
        if !pollers.is_empty() {
            return;
        }
        for _ in 0..inner.config.pollers {
            pollers.push(tokio::spawn(poll(Arc::downgrade(inner))));
        }
    }

    /// Stops the pollers (a long poll in flight is abandoned: whatever it
    /// would have returned stays hidden for one visibility timeout, then
    /// comes back) and hands over what is buffered.
    pub(crate) fn stop(&self) -> Vec<Delivery> {
        for p in lock(&self.pollers).drain(..) {
            p.abort();
        }
        lock(&self.buffer).drain(..).collect()
    }

    /// The next buffered delivery, or the pollers' last failure.
    pub(crate) fn take(&self) -> Option<Result<Delivery, TransportError>> {
        if let Some(d) = lock(&self.buffer).pop_front() {
            return Some(Ok(d));
        }
        lock(&self.failure).take().map(Err)
    }

    /// Whether the pollers run (between the first `receive` and a stop).
    pub(crate) fn is_running(&self) -> bool {
        !self.closed.load(Ordering::SeqCst) && !lock(&self.pollers).is_empty()
    }

    pub(crate) fn push(&self, deliveries: Vec<Delivery>) {
        lock(&self.buffer).extend(deliveries);
        self.ready.notify_waiters();
    }

    fn fail(&self, e: TransportError) {
        *lock(&self.failure) = Some(e);
        self.ready.notify_waiters();
    }
}

/// One poller: wait for room, long-poll up to ten, buffer them, repeat.
async fn poll(inner: Weak<Inner>) {
    let mut failures = 0u32;
    loop {
        let Some(i) = inner.upgrade() else { return };
        if i.intake.closed.load(Ordering::SeqCst) {
            return;
        }
        let batch = MAX_BATCH.min(i.config.max_in_flight);
        let room = i.room.clone();
        let Ok(permits) = room.acquire_many_owned(batch as u32).await else {
            return;
        };
        let wait = i32::try_from(i.config.wait_time.as_secs()).unwrap_or(20);
        let received = i
            .client
            .receive_message()
            .queue_url(&i.queues.source_url)
            .max_number_of_messages(batch as i32)
            .wait_time_seconds(wait)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await;
        match received {
            Ok(out) => {
                failures = 0;
                let deliveries: Vec<Delivery> = out
                    .messages
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|m| i.delivery(m))
                    .collect();
                // Each delivery's token gives its slot back when dropped.
                permits.forget();
                i.room.add_permits(batch - deliveries.len());
                metrics::counter!("parkway_sqs_received_total").increment(deliveries.len() as u64);
                if !deliveries.is_empty() {
                    i.intake.push(deliveries);
                }
            }
            Err(e) => {
                drop(permits);
                let e = error("receive messages", e);
                failures += 1;
                tracing::warn!(error = %e, failures, "long poll failed");
                let fatal = !e.is_retryable();
                i.intake.fail(e);
                if fatal {
                    return;
                }
                drop(i);
                let pause = 100u64.saturating_mul(1 << failures.min(6));
                tokio::time::sleep(Duration::from_millis(pause.min(5_000))).await;
            }
        }
    }
}
