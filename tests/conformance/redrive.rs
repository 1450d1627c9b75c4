//! Filtered redrive: only matching messages return, with replay headers;
//! dry run changes nothing; limit and rate are honoured.

use std::time::Duration;

use parkway::{
    Backoff, EnvelopeLimits, RetryPolicy,
    redrive::{Filter, RedriveOptions, ReplayRequest, redrive},
};
use tokio::time::Instant;

use super::harness::{Broker, WITHIN, eventually, finish, settle_down, start};

pub async fn filtered_redrive_moves_only_matches(b: &dyn Broker) {
    let p = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_millis(100)))
        .build()
        .unwrap();
    let q = b.queue(&p).await;
    let plan = [
        ("a1", "park-once:SCHEMA_V1"),
        ("b1", "park-once:DOWNSTREAM_BUG"),
        ("a2", "park-once:SCHEMA_V1"),
        ("b2", "park-once:DOWNSTREAM_BUG"),
        ("b3", "park-once:DOWNSTREAM_BUG"),
        ("b4", "park-once:DOWNSTREAM_BUG"),
    ];
    for (id, body) in plan {
        q.publish(id, body).await;
    }
    let w = start(&q, p);
    eventually(WITHIN, "all six parked", || async {
        q.parked().await.len() == 6
    })
    .await;
    let lot = q.transport.parking_lot();
    let only_b = Filter::default().reason("DOWNSTREAM_BUG");
    let limits = EnvelopeLimits::default();

    // Dry run: counts, moves nothing.
    let who = ReplayRequest::new("conformance", "dry run").unwrap();
    let dry = redrive(
        lot,
        &only_b,
        &RedriveOptions::default().dry_run(true),
        &who,
        &limits,
    )
    .await
    .unwrap();
    assert_eq!((dry.matched, dry.moved), (4, 0));
    settle_down().await;
    assert_eq!(q.parked().await.len(), 6, "dry run changed nothing");

    // Limit 1.
    let who = ReplayRequest::new("alice", "bug fixed").unwrap();
    let one = redrive(
        lot,
        &only_b,
        &RedriveOptions::default().limit(1),
        &who,
        &limits,
    )
    .await
    .unwrap();
    assert_eq!((one.moved, one.left), (1, 3), "{one}");
    eventually(WITHIN, "the moved message succeeds", || async {
        w.record.successes().len() == 1
    })
    .await;
    let back = w.record.successes().remove(0);
    assert!(
        back.starts_with('b'),
        "only a DOWNSTREAM_BUG message moved: {back}"
    );
    let run = w.record.runs(&back).pop().unwrap();
    let replay = run.replay.expect("replay headers on the moved message");
    assert_eq!(
        (replay.by.as_str(), replay.reason.as_str()),
        ("alice", "bug fixed")
    );
    assert_eq!(replay.id, one.replay_id);
    assert_eq!(replay.original_attempts, 1);

    // The rest at 4/s: three moves take at least half a second.
    let started = Instant::now();
    let who = ReplayRequest::new("alice", "bug fixed").unwrap();
    let rest = redrive(
        lot,
        &only_b,
        &RedriveOptions::default().rate(4.0).unwrap(),
        &who,
        &limits,
    )
    .await
    .unwrap();
    assert_eq!(rest.moved, 3, "{rest}");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "rate honoured: {:?}",
        started.elapsed()
    );
    eventually(WITHIN, "all B messages succeed", || async {
        w.record.successes().len() == 4
    })
    .await;
    let mut left = q.parked_ids().await;
    left.sort();
    assert_eq!(left, ["a1", "a2"], "non-matching messages stay parked");
    finish(w, &q).await;
}
