//! Finishing records without the partition state's lock.
//!
//! Why: every acknowledged record marks its offset finished, and that was
//! a turn of the state lock per record: the lock the pump holds while it
//! places a burst and the receives hold while they take. Under load,
//! spinning, waiting and waking on it took about 8 % of the engine's CPU
//! time (perf, happy-path bench).
//! So a finish that changes nothing about what may run next (retry-topic
//! mode with gathered commits) only queues its place under a lock of its
//! own, held for one push; the committer applies the queue under the state
//! lock once per commit interval, just before it commits.
//!
//! What must not change: only the contiguous finished prefix is committed,
//! and finishing a record whose partition was revoked is refused, not
//! dropped in silence. The generation keeps the second: it changes on every
//! rebalance in the step that first applies the queue, so a finish is
//! either queued before the rebalance (and applied, so committed, before
//! its partition goes) or sees the new generation and takes the locked
//! path, which checks the partition's epoch.

use std::sync::{
    Mutex,
    atomic::{AtomicU64, Ordering},
};

use crate::state::{Done, State};

/// Queued finishes, and the rebalance generation they belong to.
#[derive(Debug, Default)]
pub(crate) struct Finishes {
    queue: Mutex<Vec<Done>>,
    /// Written only with both the state lock and `queue` held, so a read
    /// under either lock sees the value that lock's holder works with.
    generation: AtomicU64,
}

impl Finishes {
    /// The generation to stamp on a record handed out now (read it with
    /// the state lock held).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Queues `done` if no rebalance started since `generation`: `None`
    /// if one did (take the locked path); otherwise whether the queue was
    /// empty, so its first finish wakes the committer.
    pub(crate) fn defer(&self, generation: u64, done: Done) -> Option<bool> {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if self.generation.load(Ordering::Relaxed) != generation {
            return None;
        }
        queue.push(done);
        Some(queue.len() == 1)
    }

    /// Applies every queued finish to `state` (hold its lock); for a
    /// rebalance, starts a new generation in the same step, so nothing is
    /// queued for a partition after it was applied for the last time.
    pub(crate) fn apply(&self, state: &mut State, rebalance: bool) {
        let mut batch = {
            let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            if rebalance {
                self.generation.fetch_add(1, Ordering::Relaxed);
            }
            std::mem::take(&mut *queue)
        };
        state.apply(&batch);
        batch.clear();
        // Hand the room back, so the next interval's pushes do not grow a
        // fresh vector again.
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if queue.is_empty() {
            *queue = batch;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::rec;

    fn done(epoch: u64, slot: usize, offset: i64) -> Done {
        Done {
            epoch,
            slot,
            offset,
        }
    }

    #[test]
    fn queued_finishes_commit_only_the_finished_prefix_once_applied() {
        let f = Finishes::default();
        let mut s = State::default();
        s.assign("t", 0, false);
        let now = tokio::time::Instant::now();
        for o in 0..3 {
            s.get_mut("t", 0).unwrap().fetched(rec(o, None));
        }
        let g = f.generation();
        let taken: Vec<_> = (0..3).filter_map(|_| s.take(now, false, g)).collect();
        assert_eq!(
            f.defer(g, done(taken[1].epoch, taken[1].slot, 1)),
            Some(true)
        );
        assert_eq!(
            f.defer(g, done(taken[2].epoch, taken[2].slot, 2)),
            Some(false)
        );
        assert!(s.take_gathered().is_empty(), "nothing applied yet");
        f.apply(&mut s, false);
        assert!(s.take_gathered().is_empty(), "offset 0 still holds them");
        assert_eq!(
            f.defer(g, done(taken[0].epoch, taken[0].slot, 0)),
            Some(true)
        );
        f.apply(&mut s, false);
        assert_eq!(s.take_gathered(), [("t".into(), 0, 3)]);
    }

    #[test]
    fn a_rebalance_applies_what_was_queued_and_sends_later_finishes_the_locked_way() {
        let f = Finishes::default();
        let mut s = State::default();
        s.assign("t", 0, false);
        s.get_mut("t", 0).unwrap().fetched(rec(0, None));
        s.get_mut("t", 0).unwrap().fetched(rec(1, None));
        let g = f.generation();
        let now = tokio::time::Instant::now();
        let first = s.take(now, false, g).unwrap();
        let second = s.take(now, false, g).unwrap();
        assert_eq!(first.generation, g);
        assert_eq!(f.defer(g, done(first.epoch, first.slot, 0)), Some(true));
        // The revoke: applied before the partition goes, so it commits 1.
        f.apply(&mut s, true);
        assert_eq!(s.revoke("t", 0).unwrap().to_commit, Some(1));
        assert_eq!(
            f.defer(g, done(second.epoch, second.slot, 1)),
            None,
            "a finish from before the rebalance is checked under the lock"
        );
        assert_ne!(f.generation(), g);
    }

    #[test]
    fn a_finish_finds_its_partition_by_epoch_when_slots_moved_and_a_stale_one_is_dropped() {
        let f = Finishes::default();
        let mut s = State::default();
        s.assign("t", 2, false);
        s.get_mut("t", 2).unwrap().fetched(rec_at(2, 0));
        let g = f.generation();
        let now = tokio::time::Instant::now();
        let taken = s.take(now, false, g).unwrap();
        assert_eq!(f.defer(g, done(taken.epoch, taken.slot, 0)), Some(true));
        // Another partition assigned before it: its slot moved.
        s.assign("t", 1, false);
        // A finish of an epoch that no longer exists changes nothing.
        assert_eq!(f.defer(g, done(999, 0, 0)), Some(false));
        f.apply(&mut s, false);
        assert_eq!(s.take_gathered(), [("t".into(), 2, 1)]);
    }

    fn rec_at(partition: i32, offset: i64) -> crate::state::Record {
        let mut r = rec(offset, None);
        r.partition = partition;
        r
    }
}
