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
//! The gathered offsets live in the partition state itself, so finishing
//! a record takes one lock, not two.

use std::sync::Arc;

use rdkafka::{
    Offset, TopicPartitionList,
    consumer::{CommitMode, Consumer},
};

use crate::transport::{Inner, lock};

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
        let taken = lock(&inner.state).take_gathered();
        commit(inner.consumer.as_ref(), &list(taken), CommitMode::Async);
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
