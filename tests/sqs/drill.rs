//! The practice drill on SQS: visibility back-off measured, a JSON error
//! parked on attempt 1, an exhausted transient parked, a filtered redrive
//! that moves only what matches, and a native move task that moves the rest
//! with progress.

use std::time::Duration;

use parkway::{
    Backoff, EnvelopeLimits, FailureClass, Jitter, RetryPolicy, Strategy, Transport,
    redrive::{Filter, RedriveOptions, ReplayRequest, redrive},
};

use crate::conformance::harness::{WITHIN, eventually, finish, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn practice_drill_with_filtered_and_native_redrive() {
    // Whole seconds, so each retry is a real visibility back-off.
    let backoff = Backoff::new(
        Strategy::Exponential {
            initial: Duration::from_secs(1),
            multiplier: 2.0,
        },
        Jitter::None,
        Some(Duration::from_secs(10)),
    )
    .unwrap();
    let p = RetryPolicy::builder()
        .max_attempts(4)
        .backoff(backoff)
        .park_on(["DESERIALIZATION_FAILED"])
        .build()
        .unwrap();
    let t = crate::transport(&p, |_| {}).await;
    let q = crate::queue(&t);
    q.publish("timeout", "fail:3").await;
    q.publish("json", "bad:DESERIALIZATION_FAILED").await;
    q.publish("exhausted-1", "forever").await;
    q.publish("exhausted-2", "forever").await;
    let w = start(&q, p.clone());
    let policy = p;
    eventually(WITHIN * 2, "timeout succeeds, three parked", || async {
        w.record.succeeded("timeout") == 1 && q.parked().await.len() == 3
    })
    .await;
    let runs = w.record.runs("timeout");
    assert_eq!(runs.len(), 4);
    for (pair, want) in runs.windows(2).zip([1000u64, 2000, 4000]) {
        let waited = pair[1].at - pair[0].at;
        let want = Duration::from_millis(want);
        eprintln!("drill: visibility back-off {want:?} waited {waited:?}");
        assert!(
            waited + Duration::from_millis(2) >= want && waited <= want + Duration::from_secs(1),
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
    assert_eq!(json.message.body, "bad:DESERIALIZATION_FAILED");
    let ex = parked
        .iter()
        .find(|m| m.message.id.as_deref() == Some("exhausted-1"))
        .unwrap();
    assert_eq!(ex.envelope.attempts, 4);
    assert!(
        ex.envelope.total_delay >= Duration::from_secs(7),
        "{:?}",
        ex.envelope.total_delay
    );
    assert_eq!(
        ex.envelope.origin.queue.as_deref(),
        Some(t.queue_url().rsplit('/').next().unwrap())
    );

    // Filtered: only the dependency failures, one at a time.
    let filter = Filter::default().reason("DOWNSTREAM_UNAVAILABLE");
    let lot = t.parking_lot();
    let who = ReplayRequest::new("drill", "dependency restarted").unwrap();
    let r = redrive(
        lot,
        &filter,
        &RedriveOptions::default(),
        &who,
        &EnvelopeLimits::default(),
    )
    .await
    .unwrap();
    assert_eq!(r.moved, 2, "{r}");
    let left: Vec<_> = q
        .parked()
        .await
        .into_iter()
        .filter_map(|m| m.message.id)
        .collect();
    assert_eq!(left, ["json"], "only the JSON error is left in the lot");
    // "forever" still fails: the replays spend a fresh budget and park again.
    eventually(WITHIN, "both replays handled and parked again", || async {
        ["exhausted-1", "exhausted-2"].iter().all(|id| {
            w.record
                .runs(id)
                .iter()
                .filter(|r| r.replay.is_some())
                .count()
                == 4
        }) && q.parked().await.len() == 3
    })
    .await;

    // Native: a move task moves everything left, with progress. The worker
    // is stopped first: the JSON error would fail and park again at once,
    // and the emulator's move task keeps moving what arrives (AWS's moves
    // only what was there when it started).
    w.stop().await;
    let handle = t.start_move_task(Some(10)).await.unwrap_or_else(|e| {
        panic!("StartMessageMoveTask failed ({e}); the moto fallback does not implement it: run scripts/sqs-start with Python >= 3.13 for LocalStack")
    });
    let progress = std::sync::Mutex::new(Vec::new());
    eventually(WITHIN, "the move task completes", || async {
        let tasks = t.move_tasks().await.unwrap();
        let task = tasks.into_iter().next().unwrap();
        progress
            .lock()
            .unwrap()
            .push((task.status.clone(), task.moved, task.to_move));
        task.is_finished()
    })
    .await;
    let progress = progress.into_inner().unwrap();
    eprintln!("drill: move task {handle}: {progress:?}");
    let last = t.move_tasks().await.unwrap().remove(0);
    assert_eq!(
        (last.status.as_str(), last.moved, last.to_move),
        ("COMPLETED", 3, Some(3)),
        "{last:?}"
    );
    assert!(q.parked().await.is_empty(), "the lot is empty");
    // Back at the source, envelope and all: each fails again and, its
    // budget kept by the native move, parks on that one run.
    let w = start(&q, policy);
    eventually(WITHIN, "all three parked again", || async {
        q.parked().await.len() == 3
    })
    .await;
    for p in q.parked().await {
        eprintln!(
            "drill: after the move: {:?} {:?} attempts {}",
            p.message.id, p.envelope.reason, p.envelope.attempts
        );
    }
    for id in ["json", "exhausted-1", "exhausted-2"] {
        assert_eq!(w.record.run_count(id), 1, "{id} ran once after the move");
    }
    finish(w, &q).await;
}
