//! The partition state's rules: the finished prefix, ordered and due-time
//! takes, gathering, rebalances.

use std::time::Duration;

use super::*;

pub(crate) fn rec(offset: i64, due: Option<Instant>) -> Record {
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
        .filter_map(|_| s.take(now, false, 0))
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
