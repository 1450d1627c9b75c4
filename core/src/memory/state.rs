//! The queue state behind the in-memory transport.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard},
    time::SystemTime,
};

use tokio::sync::Notify;

use crate::{clock::Clock, transport::Message};

/// A message waiting in the queue; `deliveries` is the broker-side count.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) seq: u64,
    pub(super) message: Message,
    pub(super) deliveries: u32,
}

/// A parked copy.
#[derive(Debug, Clone)]
pub(super) struct ParkedEntry {
    pub(super) id: u64,
    pub(super) message: Message,
    pub(super) parked_at: SystemTime,
}

/// The private token inside each delivery.
#[derive(Debug, Clone, Copy)]
pub(super) struct Token {
    pub(super) transport: usize,
    pub(super) seq: u64,
    pub(super) deliveries: u32,
}

/// Counters since the transport was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Messages published by callers.
    pub published: u64,
    /// Deliveries handed to consumers.
    pub delivered: u64,
    /// Deliveries acknowledged (success or duplicate).
    pub acked: u64,
    /// Retry copies scheduled.
    pub retried: u64,
    /// Messages parked.
    pub parked: u64,
    /// Messages discarded.
    pub discarded: u64,
    /// Deliveries released back unprocessed.
    pub released: u64,
    /// Parked messages moved back by redrive.
    pub redriven: u64,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) ready: VecDeque<Entry>,
    pub(super) parked: VecDeque<ParkedEntry>,
    pub(super) in_flight: usize,
    pub(super) scheduled: usize,
    pub(super) next_seq: u64,
    pub(super) closed: bool,
    pub(super) fail_next: usize,
    pub(super) stats: MemoryStats,
}

impl State {
    pub(super) fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    pub(super) fn is_idle(&self) -> bool {
        self.ready.is_empty() && self.in_flight == 0 && self.scheduled == 0
    }

    /// Takes one injected failure, if any are left.
    pub(super) fn take_failure(&mut self) -> bool {
        if self.fail_next > 0 {
            self.fail_next -= 1;
            true
        } else {
            false
        }
    }
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) name: String,
    pub(super) state: Mutex<State>,
    /// Woken when a message becomes ready or the transport closes.
    pub(super) ready: Notify,
    /// Woken on every state change (for `idle`).
    pub(super) changed: Notify,
    pub(super) clock: Arc<dyn Clock>,
}

impl Inner {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent between statements; a panic elsewhere while
        // holding the lock cannot leave it half-updated in a harmful way.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn id(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    pub(super) fn enqueue(&self, entry: Entry, front: bool) {
        {
            let mut s = self.lock();
            if front {
                s.ready.push_front(entry);
            } else {
                s.ready.push_back(entry);
            }
        }
        self.ready.notify_one();
    }

    /// Wakes `idle()` waiters if the queue just became idle. (Only then:
    /// waking them on every change costs more than the queue itself.)
    pub(super) fn notify_if_idle(&self, state: &State) {
        if state.is_idle() || state.closed {
            self.changed.notify_waiters();
        }
    }
}
