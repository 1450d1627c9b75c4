//! Offset commits, gathered.
//!
//! Committing after every finished record costs an OffsetCommit request,
//! and a broker round of wake-ups, per record: on a fast partition that is
//! most of the consumer's work. So finished offsets gather for
//! `commit_interval` (5 ms by default) and one commit carries the highest
//! of each partition. What is committed is still only the contiguous
//! finished prefix (see `state`); gathering only widens the redelivery
//! window after a crash by that interval. A revoked partition's gathered
//! offset is committed synchronously before it goes, so its new owner does
//! not redo finished work.
//!
//! The gathered offsets live in the partition state itself; finishes
//! queued without its lock (see `finishes`) are applied just before each
//! commit.

use std::sync::Arc;

use rdkafka::{
    Offset, TopicPartitionList,
    consumer::{CommitMode, Consumer},
};

use parkway_core::TransportError;

use crate::{
    state::Done,
    token::Token,
    transport::{Inner, lock, revoked},
};

/// A commit of `offsets` (topic, partition, next offset).
pub(crate) fn list(offsets: impl IntoIterator<Item = (String, i32, i64)>) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for (topic, partition, next) in offsets {
        if let Err(e) = tpl.add_partition_offset(&topic, partition, Offset::Offset(next)) {
            tracing::warn!(error = %e, %topic, partition, "could not queue an offset commit");
        }
    }
    tpl
}

/// Commits `tpl` if it holds anything.
pub(crate) fn commit<C: Consumer<X>, X: rdkafka::consumer::ConsumerContext>(
    consumer: &C,
    tpl: &TopicPartitionList,
    mode: CommitMode,
) {
    if tpl.count() == 0 {
        return;
    }
    if let Err(e) = consumer.commit(tpl, mode) {
        tracing::warn!(error = %e, partitions = tpl.count(), "offset commit failed; a later commit of each partition supersedes it (until then a restart redelivers those records)");
    }
}

/// Commits what gathered, once per interval while records finish.
pub(crate) async fn run(inner: Arc<Inner>) {
    loop {
        inner.gathered.notified().await;
        tokio::time::sleep(inner.config.commit_interval).await;
        let taken = inner.committable();
        commit(inner.consumer.as_ref(), &list(taken), CommitMode::Async);
    }
}

impl Inner {
    /// Every offset that may be committed now: the queued finishes
    /// applied, then the gathered offsets taken.
    pub(crate) fn committable(&self) -> Vec<(String, i32, i64)> {
        let mut s = lock(&self.state);
        self.finishes.apply(&mut s, false);
        s.take_gathered()
    }

    /// Commits everything before `next` now, or gathers it for the
    /// committer.
    pub(crate) fn commit(&self, topic: &str, partition: i32, next: i64) {
        if self.config.commit_interval.is_zero() {
            self.commit_now(topic, partition, next);
        } else if lock(&self.state).gather(topic, partition, next) {
            self.gathered.notify_one();
        }
    }

    fn commit_now(&self, topic: &str, partition: i32, next: i64) {
        let mut tpl = TopicPartitionList::new();
        if tpl
            .add_partition_offset(topic, partition, Offset::Offset(next))
            .is_ok()
        {
            if let Err(e) = self.consumer.commit(&tpl, CommitMode::Async) {
                tracing::warn!(error = %e, topic, partition, next, "offset commit failed; it is retried with the next one");
            }
        }
    }

    /// Marks a record finished and commits the grown prefix (gathering it
    /// under the same lock).
    ///
    /// In retry-topic mode with gathered commits the finish is only queued
    /// (see `finishes`): nothing waits on it but the next commit. In
    /// pause-partition mode the partition's next record waits on it, and
    /// without gathering its commit is due now: those take the lock.
    pub(crate) fn finish(&self, token: &Token) -> Result<(), TransportError> {
        let gather = !self.config.commit_interval.is_zero();
        if gather && !self.ordered {
            let done = Done {
                epoch: token.epoch,
                slot: token.slot,
                offset: token.offset,
            };
            // `None`: a rebalance since it was taken; check its partition.
            if let Some(first) = self.finishes.defer(token.generation, done) {
                if first {
                    self.gathered.notify_one();
                }
                return Ok(());
            }
        }
        let (topic, partition) = (&*token.topic, token.partition);
        let (now, wake) = {
            let mut s = lock(&self.state);
            let Some(slot) = s.index(topic, partition, token.slot) else {
                return Err(revoked());
            };
            let next = match s.at_mut(slot) {
                Some(p) if p.epoch == token.epoch => p.finish(token.offset),
                _ => return Err(revoked()),
            };
            match next {
                Some(next) if gather => (None, s.gather_at(slot, next)),
                next => (next, false),
            }
        };
        if let Some(next) = now {
            self.commit_now(topic, partition, next);
        }
        if wake {
            self.gathered.notify_one();
        }
        // In pause-partition mode the next record of this partition may run
        // now; otherwise nothing waited on this one (no wake-up to spend).
        if self.ordered {
            self.ready.notify_one();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_lists_each_partition_once() {
        let tpl = list([("t".to_owned(), 0, 9), ("t".to_owned(), 1, 3)]);
        let got: Vec<_> = tpl
            .elements()
            .into_iter()
            .map(|e| (e.topic().to_owned(), e.partition(), e.offset()))
            .collect();
        assert_eq!(
            got,
            [
                ("t".to_owned(), 0, Offset::Offset(9)),
                ("t".to_owned(), 1, Offset::Offset(3))
            ]
        );
    }
}
