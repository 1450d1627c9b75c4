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
/// place in the state (the settle's lookup hint, see [`State::index`]).
#[derive(Debug)]
pub(crate) struct Taken {
    pub(crate) record: Record,
    pub(crate) epoch: u64,
    pub(crate) slot: usize,
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

    /// The next runnable record across partitions, round-robin.
    pub(crate) fn take(&mut self, now: Instant, ordered: bool) -> Option<Taken> {
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
mod tests {
    use std::time::Duration;

    use super::*;

    fn rec(offset: i64, due: Option<Instant>) -> Record {
        Record {
            topic: "t".into(),
            partition: 0,
            offset,
            key: None,
            payload: bytes::Bytes::new(),
            headers: Headers::new(),
            raw_headers: None,
            due,
        }
    }

    #[test]
    fn commits_only_the_finished_prefix() {
        let mut p = Partition::new(1, false);
        for o in 10..14 {
            p.fetched(rec(o, None));
        }
        let now = Instant::now();
        let taken: Vec<_> = (0..4)
            .filter_map(|_| p.take(now, false))
            .map(|r| r.offset)
            .collect();
        assert_eq!(taken, [10, 11, 12, 13]);
        assert_eq!(p.finish(11), None, "10 is unfinished: nothing to commit");
        assert_eq!(p.finish(13), None);
        assert_eq!(p.finish(10), Some(12), "10 and 11 done: commit 12");
        assert_eq!(p.finish(12), Some(14));
    }

    #[test]
    fn ordered_partitions_run_one_at_a_time() {
        let mut p = Partition::new(1, false);
        p.fetched(rec(0, None));
        p.fetched(rec(1, None));
        let now = Instant::now();
        let first = p.take(now, true).unwrap();
        assert!(
            p.take(now, true).is_none(),
            "nothing behind the in-flight record"
        );
        p.release(first);
        assert_eq!(
            p.take(now, true).unwrap().offset,
            0,
            "released back at the head"
        );
    }

    #[test]
    fn retry_records_wait_for_their_due_time_out_of_order() {
        let now = Instant::now();
        let mut p = Partition::new(1, true);
        p.fetched(rec(0, Some(now + Duration::from_secs(5))));
        p.fetched(rec(1, Some(now + Duration::from_secs(1))));
        assert!(p.take(now, false).is_none());
        assert_eq!(p.next_due(), Some(now + Duration::from_secs(1)));
        let r = p.take(now + Duration::from_secs(1), false).unwrap();
        assert_eq!(
            r.offset, 1,
            "a later record due sooner is not stuck behind the head"
        );
        assert_eq!(p.finish(1), None, "but offset 0 still holds the commit");
    }

    #[test]
    fn one_commit_carries_the_highest_gathered_offset_per_partition() {
        let mut s = State::default();
        s.assign("t", 0, false);
        s.assign("t", 1, false);
        assert!(s.gather("t", 0, 5), "the first wakes the committer");
        assert!(!s.gather("t", 0, 9), "later ones do not");
        assert!(
            !s.gather("t", 0, 7),
            "a late report of an older prefix never goes back"
        );
        assert!(!s.gather("t", 1, 3));
        assert!(!s.gather("t", 2, 4), "not assigned: nothing to gather");
        assert_eq!(s.take_gathered(), [("t".into(), 0, 9), ("t".into(), 1, 3)]);
        assert!(s.take_gathered().is_empty(), "taken once");
        assert!(s.gather("t", 1, 4), "a new round wakes the committer again");
        let revoked = s.revoke("t", 1).unwrap();
        assert_eq!(
            revoked.to_commit,
            Some(4),
            "a revoked partition takes its own offset along"
        );
        assert!(s.take_gathered().is_empty());
    }

    #[test]
    fn partitions_take_turns_and_revoked_ones_are_gone() {
        let mut s = State::default();
        s.assign("t", 1, false);
        s.assign("t", 0, false);
        for p in [0, 1] {
            let mut r = rec(10, None);
            r.partition = p;
            s.get_mut("t", p).unwrap().fetched(r);
            let mut r = rec(11, None);
            r.partition = p;
            s.get_mut("t", p).unwrap().fetched(r);
        }
        let now = Instant::now();
        let order: Vec<_> = (0..4)
            .filter_map(|_| s.take(now, false))
            .map(|t| t.record.partition)
            .collect();
        assert_eq!(order, [0, 1, 0, 1]);
        let epoch = s.get("t", 1).unwrap().epoch;
        s.assign("t", 1, false);
        assert!(
            s.get("t", 1).unwrap().epoch > epoch,
            "a re-assignment starts a new epoch"
        );
        assert!(s.revoke("t", 0).is_some());
        assert!(s.get("t", 0).is_none());
    }

    #[test]
    fn a_stale_index_hint_falls_back_to_the_search() {
        let mut s = State::default();
        s.assign("t", 0, false);
        s.assign("t", 2, false);
        let at = s.index("t", 2, 0).unwrap();
        assert_eq!(s.index("t", 2, at), Some(at), "a good hint is taken");
        // A rebalance inserts before it: the old place holds another one.
        s.assign("t", 1, false);
        let moved = s.index("t", 2, at).unwrap();
        assert_ne!(moved, at);
        assert!(s.at_mut(moved).is_some());
        assert_eq!(s.index("t", 2, 99), Some(moved), "a hint out of range too");
        assert_eq!(s.index("u", 2, moved), None, "another topic is not found");
        s.revoke("t", 2);
        assert_eq!(s.index("t", 2, moved), None, "nor a revoked partition");
    }
}
