//! The in-memory transport: the embedded default, and the reference for the
//! semantics every broker transport must have.
//!
//! It is not a toy. Delays are real timers (so `tokio::time::pause` makes
//! them instant in tests), the broker keeps its own delivery count (so a
//! forged header cannot buy retries here either), released deliveries go
//! back to the head of the queue (so ordered mode never reorders), and the
//! parking lot supports browse and filtered redrive through the same
//! [`ParkingLot`] contract. What it does not do is survive the process.

mod parking;
mod state;

pub use state::MemoryStats;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;

use self::{
    parking::MemoryParkingLot,
    state::{Entry, Inner, ParkedEntry, State, Token},
};
use crate::{
    clock::{Clock, TokioClock},
    envelope::Origin,
    transport::{
        Capabilities, DelayMode, Delivery, ErrorKind, Message, ParkingLot, Settle, Transport,
        TransportError, Unsettled,
    },
};

const KIND: &str = "memory";

/// An in-process queue with timers, a parking lot and redrive.
///
/// Clones share the same queue (competing consumers, or a producer handle).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use parkway_core::{memory::MemoryTransport, Message, Settle, Transport};
/// let t = MemoryTransport::new("orders");
/// t.publish(Message::new("orders", "hello"));
/// let d = t.receive().await.unwrap().unwrap();
/// t.settle(d, Settle::Ack).await.unwrap();
/// assert_eq!(t.stats().acked, 1);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct MemoryTransport {
    inner: Arc<Inner>,
    lot: MemoryParkingLot,
}

impl MemoryTransport {
    /// A queue named `name` (the origin recorded in envelopes).
    pub fn new(name: impl Into<String>) -> Self {
        MemoryTransport::with_clock(name, Arc::new(TokioClock::new()))
    }

    /// A queue whose parked-at times come from `clock`.
    pub fn with_clock(name: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        let inner = Arc::new(Inner {
            name: name.into(),
            state: std::sync::Mutex::new(State::default()),
            ready: tokio::sync::Notify::new(),
            changed: tokio::sync::Notify::new(),
            clock,
        });
        MemoryTransport {
            lot: MemoryParkingLot::new(inner.clone()),
            inner,
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Appends a message to the queue.
    pub fn publish(&self, message: Message) {
        let entry = {
            let mut s = self.inner.lock();
            s.stats.published += 1;
            Entry {
                seq: s.next_seq(),
                message,
                deliveries: 0,
            }
        };
        self.inner.enqueue(entry, false);
    }

    /// Counters since creation.
    pub fn stats(&self) -> MemoryStats {
        self.inner.lock().stats
    }

    /// Messages waiting to be delivered now.
    pub fn ready_len(&self) -> usize {
        self.inner.lock().ready.len()
    }

    /// Messages in the parking lot.
    pub fn parked_len(&self) -> usize {
        self.inner.lock().parked.len()
    }

    /// Stops delivering: `receive` returns `Ok(None)` from now on. Messages
    /// still queued stay queued (and countable).
    pub fn close(&self) {
        self.inner.lock().closed = true;
        self.inner.ready.notify_waiters();
        self.inner.changed.notify_waiters();
    }

    /// Makes the next `n` settlements or redrive moves fail as if the broker
    /// had refused them (for failure-path tests and drills).
    pub fn fail_next(&self, n: usize) {
        self.inner.lock().fail_next = n;
    }

    /// Waits until nothing is queued, in flight or scheduled for later.
    pub async fn idle(&self) {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.inner.lock().is_idle() {
                return;
            }
            changed.await;
        }
    }

    /// Waits for ready messages and hands up to `max` to `push`; returns
    /// how many, `0` once closed.
    async fn take(&self, max: usize, mut push: impl FnMut(Delivery) + Send) -> usize {
        // Fast path: messages are waiting (no waiter registration needed).
        if let Some(n) = self.try_take(max, &mut push) {
            return n;
        }
        loop {
            let ready = self.inner.ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            if let Some(n) = self.try_take(max, &mut push) {
                return n;
            }
            ready.await;
        }
    }

    /// Takes up to `max` ready messages: `Some(0)` when closed, `Some(n)`
    /// when some were taken, `None` when there is nothing yet.
    fn try_take(&self, max: usize, push: &mut impl FnMut(Delivery)) -> Option<usize> {
        let mut s = self.inner.lock();
        if s.closed {
            return Some(0);
        }
        let n = s.ready.len().min(max);
        if n == 0 {
            return None;
        }
        for mut e in s.ready.drain(..n) {
            e.deliveries = e.deliveries.saturating_add(1);
            let token = Token {
                transport: self.inner.id(),
                seq: e.seq,
                deliveries: e.deliveries,
            };
            let origin = Origin {
                queue: Some(self.inner.name.clone()),
                partition: None,
                offset: i64::try_from(e.seq).ok(),
            };
            let lane = e.message.key.clone();
            let mut d =
                Delivery::new(e.message, origin, token).with_broker_attempts(e.deliveries - 1);
            d.lane = lane;
            push(d);
        }
        s.in_flight += n;
        s.stats.delivered += n as u64;
        Some(n)
    }

    fn token(&self, d: &Delivery) -> Option<Token> {
        d.token::<Token>()
            .copied()
            .filter(|t| t.transport == self.inner.id())
    }
}

#[async_trait]
impl Transport for MemoryTransport {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_delay: None,
            delay_mode: DelayMode::Exact {
                granularity: Duration::from_millis(1),
            },
            ordered: true,
            native_redrive: false,
            halts_in_place: false,
        }
    }

    async fn receive(&self) -> Result<Option<Delivery>, TransportError> {
        let mut one = None;
        self.take(1, |d| one = Some(d)).await;
        Ok(one)
    }

    async fn receive_many(
        &self,
        into: &mut Vec<Delivery>,
        max: usize,
    ) -> Result<usize, TransportError> {
        Ok(self.take(max.max(1), |d| into.push(d)).await)
    }

    async fn settle(&self, delivery: Delivery, action: Settle) -> Result<(), Unsettled> {
        let refuse = |delivery, kind, detail: &str| Unsettled {
            action: action.name(),
            error: TransportError::new(KIND, kind, detail),
            delivery,
        };
        let Some(token) = self.token(&delivery) else {
            return Err(refuse(
                delivery,
                ErrorKind::Config,
                "delivery is not from this queue",
            ));
        };
        if matches!(action, Settle::Halt { .. }) {
            return Err(refuse(
                delivery,
                ErrorKind::Unsupported,
                "the memory transport cannot halt in place (it stops the worker instead)",
            ));
        }
        {
            let mut s = self.inner.lock();
            if !matches!(action, Settle::Release) && s.take_failure() {
                drop(s);
                return Err(refuse(delivery, ErrorKind::Refused, "injected failure"));
            }
            s.in_flight = s.in_flight.saturating_sub(1);
        }
        let Delivery { mut message, .. } = delivery;
        match action {
            Settle::Ack => self.inner.lock().stats.acked += 1,
            Settle::Discard => self.inner.lock().stats.discarded += 1,
            Settle::Park { headers } => {
                message.headers = headers;
                let mut s = self.inner.lock();
                s.stats.parked += 1;
                let parked_at = self.inner.clock.now();
                s.parked.push_back(ParkedEntry {
                    id: token.seq,
                    message,
                    parked_at,
                });
            }
            Settle::Release => {
                self.inner.lock().stats.released += 1;
                let entry = Entry {
                    seq: token.seq,
                    message,
                    deliveries: token.deliveries.saturating_sub(1),
                };
                self.inner.enqueue(entry, true);
            }
            Settle::Retry { delay, headers } => {
                message.headers = headers;
                {
                    let mut s = self.inner.lock();
                    s.stats.retried += 1;
                    s.scheduled += 1;
                }
                let inner = self.inner.clone();
                let entry = Entry {
                    seq: token.seq,
                    message,
                    deliveries: token.deliveries,
                };
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    // Enqueue before un-counting, so the queue never looks
                    // idle in between.
                    inner.enqueue(entry, false);
                    inner.lock().scheduled -= 1;
                });
            }
            // Refused above, before anything changed.
            Settle::Halt { .. } => {}
        }
        self.inner.notify_if_idle(&self.inner.lock());
        Ok(())
    }

    fn parking_lot(&self) -> &dyn ParkingLot {
        &self.lot
    }
}

#[cfg(test)]
mod tests;
