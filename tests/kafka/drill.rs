//! The practice drill on Kafka, and a redrive that never replays twice.

use std::time::Duration;

use parkway::{
    Backoff, EnvelopeLimits, FailureClass, Jitter, RetryPolicy, Strategy, Transport,
    redrive::{Filter, RedriveOptions, ReplayRequest, redrive},
};

use crate::conformance::{
    Queue,
    harness::{WITHIN, eventually, finish, start},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn practice_drill_and_redrive_never_twice() {
    let backoff = Backoff::new(
        Strategy::Exponential {
            initial: Duration::from_millis(200),
            multiplier: 2.0,
        },
        Jitter::None,
        Some(Duration::from_secs(10)),
    )
    .unwrap();
    let p = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(backoff)
        .park_on(["DESERIALIZATION_FAILED"])
        .build()
        .unwrap();
    let t = crate::transport(&p, 2, |_| {}).await;
    let q = Queue {
        transport: std::sync::Arc::new(t.clone()),
        publisher: std::sync::Arc::new(crate::Producer(t.clone())),
    };
    q.publish("timeout", "fail:3").await;
    q.publish("json", "bad:DESERIALIZATION_FAILED").await;
    q.publish("exhausted-1", "forever").await;
    q.publish("exhausted-2", "forever").await;
    let w = start(&q, p);
    eventually(WITHIN * 2, "timeout succeeds, three parked", || async {
        w.record.succeeded("timeout") == 1 && q.parked().await.len() == 3
    })
    .await;
    let runs = w.record.runs("timeout");
    for (pair, want) in runs.windows(2).zip([200u64, 400, 800]) {
        let waited = pair[1].at - pair[0].at;
        let want = Duration::from_millis(want);
        assert!(
            waited + Duration::from_millis(2) >= want
                && waited <= want + Duration::from_millis(150),
            "waited {waited:?}, want {want:?}"
        );
    }
    let parked = q.parked().await;
    let json = parked
        .iter()
        .find(|m| m.message.id.as_deref() == Some("json"))
        .unwrap();
    assert_eq!(
        (json.envelope.attempts, json.envelope.class),
        (1, Some(FailureClass::PermanentTechnical))
    );
    let ex = parked
        .iter()
        .find(|m| m.message.id.as_deref() == Some("exhausted-1"))
        .unwrap();
    assert_eq!(ex.envelope.attempts, 5);
    assert!(ex.envelope.origin.partition.is_some());

    // Redrive the dependency failures, limit 1, twice over: each run moves
    // a different record, and a third finds nothing new.
    let filter = Filter::default().reason("DOWNSTREAM_UNAVAILABLE");
    let lot = t.parking_lot();
    let mut moved_ids = Vec::new();
    for _ in 0..3 {
        let who = ReplayRequest::new("drill", "dependency restarted").unwrap();
        let r = redrive(
            lot,
            &filter,
            &RedriveOptions::default().limit(1),
            &who,
            &EnvelopeLimits::default(),
        )
        .await
        .unwrap();
        moved_ids.push(r.moved);
    }
    assert_eq!(
        moved_ids,
        [1, 1, 0],
        "never the same dead-letter record twice"
    );
    let left: Vec<_> = q
        .parked()
        .await
        .into_iter()
        .filter_map(|m| m.message.id)
        .collect();
    assert_eq!(left, ["json"], "only the JSON error is left in the lot");
    eventually(WITHIN, "both replays handled", || async {
        ["exhausted-1", "exhausted-2"]
            .iter()
            .all(|id| w.record.runs(id).iter().any(|r| r.replay.is_some()))
    })
    .await;
    finish(w, &q).await;
}
