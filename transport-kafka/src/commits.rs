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

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard},
};

use rdkafka::{
    Offset, TopicPartitionList,
    consumer::{CommitMode, Consumer},
};
use tokio::sync::Notify;

use crate::transport::Inner;

/// Finished offsets waiting for the next commit.
#[derive(Debug, Default)]
pub(crate) struct Commits {
    /// Topic → partition → next offset; looked up by borrowed topic, so
    /// recording a finished record allocates only for a new topic.
    pending: Mutex<BTreeMap<String, BTreeMap<i32, i64>>>,
    wake: Notify,
}

impl Commits {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, BTreeMap<i32, i64>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that everything before `next` is finished.
    pub(crate) fn record(&self, topic: &str, partition: i32, next: i64) {
        let first = {
            let mut p = self.lock();
            let first = p.is_empty();
            let parts = match p.get_mut(topic) {
                Some(parts) => parts,
                None => p.entry(topic.to_owned()).or_default(),
            };
            let o = parts.entry(partition).or_insert(next);
            *o = (*o).max(next);
            first
        };
        if first {
            self.wake.notify_one();
        }
    }

    /// Takes the gathered offsets, all of them or only those of `only`.
    pub(crate) fn take(&self, only: Option<&TopicPartitionList>) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::new();
        let mut p = self.lock();
        let taken: Vec<(String, i32, i64)> = match only {
            None => std::mem::take(&mut *p)
                .into_iter()
                .flat_map(|(t, parts)| parts.into_iter().map(move |(q, o)| (t.clone(), q, o)))
                .collect(),
            Some(only) => only
                .elements()
                .into_iter()
                .filter_map(|e| {
                    let parts = p.get_mut(e.topic())?;
                    let next = parts.remove(&e.partition())?;
                    if parts.is_empty() {
                        p.remove(e.topic());
                    }
                    Some((e.topic().to_owned(), e.partition(), next))
                })
                .collect(),
        };
        for (topic, partition, next) in taken {
            if let Err(e) = tpl.add_partition_offset(&topic, partition, Offset::Offset(next)) {
                tracing::warn!(error = %e, %topic, partition, "could not queue an offset commit");
            }
        }
        tpl
    }
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
        inner.commits.wake.notified().await;
        tokio::time::sleep(inner.config.commit_interval).await;
        let tpl = inner.commits.take(None);
        commit(inner.consumer.as_ref(), &tpl, CommitMode::Async);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(tpl: &TopicPartitionList) -> Vec<(String, i32, Offset)> {
        tpl.elements()
            .into_iter()
            .map(|e| (e.topic().to_owned(), e.partition(), e.offset()))
            .collect()
    }

    #[test]
    fn one_commit_carries_the_highest_finished_offset_per_partition() {
        let c = Commits::default();
        c.record("t", 0, 5);
        c.record("t", 0, 9);
        c.record("t", 0, 7); // late report of an older prefix: never goes back
        c.record("t", 1, 3);
        assert_eq!(
            offsets(&c.take(None)),
            [
                ("t".into(), 0, Offset::Offset(9)),
                ("t".into(), 1, Offset::Offset(3))
            ]
        );
        assert_eq!(c.take(None).count(), 0, "taken once");
    }

    #[test]
    fn a_revoked_partition_takes_only_its_own_offsets() {
        let c = Commits::default();
        c.record("t", 0, 5);
        c.record("t", 1, 8);
        let mut revoked = TopicPartitionList::new();
        revoked.add_partition("t", 1);
        revoked.add_partition("t", 2);
        assert_eq!(
            offsets(&c.take(Some(&revoked))),
            [("t".into(), 1, Offset::Offset(8))]
        );
        assert_eq!(offsets(&c.take(None)), [("t".into(), 0, Offset::Offset(5))]);
    }
}
