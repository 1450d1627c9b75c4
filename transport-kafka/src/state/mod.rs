//! Per-partition bookkeeping: what was fetched, what is in flight, and how
//! far the committed offset may move.
//!
//! The rule this file exists for: **only the contiguous prefix of finished
//! records is committed.** A record that failed, is being retried in place,
//! or is still in the handler holds the commit back, so a crash or a
//! rebalance redelivers it instead of skipping it.

use std::{collections::VecDeque, sync::Arc, time::SystemTime};

use parkway_core::envelope::Headers;
use rdkafka::message::OwnedHeaders;
use tokio::time::Instant;

/// A fetched record, not yet handed out.
///
/// Its content moves into the delivery's message when it is handed out;
/// what the message cannot hold exactly stays in the token (`raw_key`,
/// `raw_headers`), and the record is put together again from both should it
/// go back to the buffer or be halted.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// Shared by the records of a topic (no copy per record).
    pub(crate) topic: Arc<str>,
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) payload: bytes::Bytes,
    /// The neutral view of the record's headers.
    pub(crate) headers: Headers,
    /// The record's own headers, kept only when the neutral view is lossy
    /// (see `headers::read`).
    pub(crate) raw_headers: Option<OwnedHeaders>,
    /// Retry records: when they may run.
    pub(crate) due: Option<Instant>,
}

/// A record just taken from its partition, with that partition's epoch and
/// place in the state (the settle's lookup hint, see [`State::index`]), and
/// the rebalance generation it was taken in (see `finishes`).
#[derive(Debug)]
pub(crate) struct Taken {
    pub(crate) record: Record,
    pub(crate) epoch: u64,
    pub(crate) slot: usize,
    pub(crate) generation: u64,
}

/// A finished record, queued to be marked so (see `finishes`): its
/// partition's epoch (unique per assignment) and place hint, and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Done {
    pub(crate) epoch: u64,
    pub(crate) slot: usize,
    pub(crate) offset: i64,
}

/// A record whose policy spent its budget with `on_exhausted = "halt"`:
/// still in flight (so nothing behind it runs in ordered mode and the
/// commit cannot pass it), waiting for an operator.
#[derive(Debug, Clone)]
pub(crate) struct Halted {
    pub(crate) record: Record,
    /// The final envelope, for the dead-letter copy if the operator skips it.
    pub(crate) headers: Headers,
    pub(crate) reason: Option<String>,
    pub(crate) since: SystemTime,
}

/// One assigned partition.
#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) epoch: u64,
    /// A retry-tier partition (records wait for their due time) rather than
    /// a source partition.
    pub(crate) tier: bool,
    buffer: VecDeque<Record>,
    /// Fetched offsets in order, with whether each is finished.
    order: VecDeque<(i64, bool)>,
    in_flight: usize,
    /// Highest offset fetched so far (offsets only grow between
    /// assignments; a repeat after a re-fetch is ignored).
    last_fetched: Option<i64>,
    pub(crate) paused: bool,
    pub(crate) halted: Option<Halted>,
    /// The next offset to commit: finished, gathered for the committer.
    pub(crate) to_commit: Option<i64>,
}

impl Partition {
    pub(crate) fn new(epoch: u64, tier: bool) -> Self {
        Partition {
            epoch,
            tier,
            buffer: VecDeque::new(),
            order: VecDeque::new(),
            in_flight: 0,
            last_fetched: None,
            paused: false,
            halted: None,
            to_commit: None,
        }
    }

    pub(crate) fn buffered(&self) -> usize {
        self.buffer.len()
    }

    pub(crate) fn fetched(&mut self, r: Record) {
        if self.last_fetched.is_some_and(|last| r.offset <= last) {
            return;
        }
        self.last_fetched = Some(r.offset);
        self.order.push_back((r.offset, false));
        self.buffer.push_back(r);
    }

    /// The next record that may run now: the head of a source partition (in
    /// ordered mode only when nothing else from it is in flight), or any due
    /// record of a tier partition.
    pub(crate) fn take(&mut self, now: Instant, ordered: bool) -> Option<Record> {
        let i = if self.tier {
            self.buffer
                .iter()
                .position(|r| r.due.is_none_or(|d| d <= now))?
        } else {
            if ordered && self.in_flight > 0 {
                return None;
            }
            if self.buffer.is_empty() {
                return None;
            }
            0
        };
        let r = self.buffer.remove(i)?;
        self.in_flight += 1;
        Some(r)
    }

    /// The earliest due time of a waiting retry record.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        if !self.tier {
            return None;
        }
        self.buffer.iter().filter_map(|r| r.due).min()
    }

    /// Marks a record finished; returns the offset to commit if the
    /// finished prefix grew.
    pub(crate) fn finish(&mut self, offset: i64) -> Option<i64> {
        self.in_flight = self.in_flight.saturating_sub(1);
        // `order` is sorted: offsets were pushed as they grew.
        if let Ok(i) = self.order.binary_search_by_key(&offset, |(o, _)| *o) {
            if let Some(e) = self.order.get_mut(i) {
                e.1 = true;
            }
        }
        let mut last = None;
        while let Some((o, true)) = self.order.front().copied() {
            last = Some(o);
            self.order.pop_front();
        }
        last.map(|o| o + 1)
    }

    /// Puts an unfinished record back where it was.
    pub(crate) fn release(&mut self, r: Record) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let at = self
            .buffer
            .iter()
            .position(|b| b.offset > r.offset)
            .unwrap_or(self.buffer.len());
        self.buffer.insert(at, r);
    }
}

/// Every assigned partition, sorted by topic and partition: looked up on
/// every receive and settle, so by borrowed key and without allocating.
#[derive(Debug, Default)]
pub(crate) struct State {
    parts: Vec<(String, i32, Partition)>,
    next_epoch: u64,
    /// Round-robin start, so no partition starves the others.
    cursor: usize,
    /// Some partition has an offset gathered since the committer last took.
    gathering: bool,
}

impl State {
    fn find(&self, topic: &str, partition: i32) -> Result<usize, usize> {
        self.parts
            .binary_search_by(|(t, p, _)| (t.as_str(), *p).cmp(&(topic, partition)))
    }

    pub(crate) fn assign(&mut self, topic: &str, partition: i32, tier: bool) {
        self.next_epoch += 1;
        let fresh = Partition::new(self.next_epoch, tier);
        match self.find(topic, partition) {
            Ok(i) => self.parts[i].2 = fresh,
            Err(i) => self.parts.insert(i, (topic.to_owned(), partition, fresh)),
        }
    }

    pub(crate) fn revoke(&mut self, topic: &str, partition: i32) -> Option<Partition> {
        let i = self.find(topic, partition).ok()?;
        Some(self.parts.remove(i).2)
    }

    pub(crate) fn get(&self, topic: &str, partition: i32) -> Option<&Partition> {
        let i = self.find(topic, partition).ok()?;
        self.parts.get(i).map(|e| &e.2)
    }

    pub(crate) fn get_mut(&mut self, topic: &str, partition: i32) -> Option<&mut Partition> {
        let i = self.find(topic, partition).ok()?;
        self.at_mut(i)
    }

    /// Where the partition is, trying `hint` first: the place it had when
    /// its record was taken, or the previous record's. Entries move only on
    /// a rebalance, so the hint almost always holds, and a settle costs one
    /// comparison instead of a search.
    pub(crate) fn index(&self, topic: &str, partition: i32, hint: usize) -> Option<usize> {
        match self.parts.get(hint) {
            Some((t, p, _)) if *p == partition && t == topic => Some(hint),
            _ => self.find(topic, partition).ok(),
        }
    }

    /// The partition at `i` (from [`State::index`] or [`State::take`]).
    pub(crate) fn at_mut(&mut self, i: usize) -> Option<&mut Partition> {
        self.parts.get_mut(i).map(|e| &mut e.2)
    }

    /// The next runnable record across partitions, round-robin; taken in
    /// rebalance `generation`.
    pub(crate) fn take(&mut self, now: Instant, ordered: bool, generation: u64) -> Option<Taken> {
        let n = self.parts.len();
        for i in 0..n {
            let at = (self.cursor + i) % n;
            let p = &mut self.parts[at].2;
            if let Some(record) = p.take(now, ordered) {
                self.cursor = (at + 1) % n;
                return Some(Taken {
                    record,
                    epoch: p.epoch,
                    slot: at,
                    generation,
                });
            }
        }
        None
    }

    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.parts.iter().filter_map(|e| e.2.next_due()).min()
    }

    /// Gathers `next` as the partition's offset to commit (never moving
    /// back); returns whether it is the first since the committer last
    /// took, so the committer is woken once per round.
    pub(crate) fn gather(&mut self, topic: &str, partition: i32, next: i64) -> bool {
        match self.find(topic, partition) {
            Ok(i) => self.gather_at(i, next),
            Err(_) => false,
        }
    }

    /// [`State::gather`] for the partition at `i`.
    pub(crate) fn gather_at(&mut self, i: usize, next: i64) -> bool {
        let Some(p) = self.at_mut(i) else {
            return false;
        };
        p.to_commit = Some(p.to_commit.map_or(next, |o| o.max(next)));
        !std::mem::replace(&mut self.gathering, true)
    }

    /// Marks queued finishes and gathers the offsets they let commit. A
    /// finish whose partition is gone (its epoch no longer assigned) is
    /// dropped: the partition's new owner runs the record again.
    pub(crate) fn apply(&mut self, done: &[Done]) {
        for d in done {
            let at = match self.parts.get(d.slot) {
                Some((_, _, p)) if p.epoch == d.epoch => Some(d.slot),
                // Slots move on a rebalance: look for the epoch.
                _ => self.parts.iter().position(|e| e.2.epoch == d.epoch),
            };
            let Some(at) = at else { continue };
            if let Some(next) = self.parts[at].2.finish(d.offset) {
                self.gather_at(at, next);
            }
        }
    }

    /// Takes every gathered offset, for one commit.
    pub(crate) fn take_gathered(&mut self) -> Vec<(String, i32, i64)> {
        self.gathering = false;
        self.parts
            .iter_mut()
            .filter_map(|(t, q, p)| p.to_commit.take().map(|o| (t.clone(), *q, o)))
            .collect()
    }

    /// Every halted record of the partitions this consumer holds.
    pub(crate) fn halted(&self) -> impl Iterator<Item = &Halted> {
        self.parts.iter().filter_map(|e| e.2.halted.as_ref())
    }
}

#[cfg(test)]
pub(crate) mod tests;
