//! The worker and redrive report through the `metrics` facade under the
//! documented names. (Its own test binary: the recorder is process-global.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests abort on setup failure

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use parkway::{
    Backoff, EnvelopeLimits, Failure, Handler, Message, RetryPolicy, Transport, Worker,
    memory::MemoryTransport,
    redrive::{Filter, RedriveOptions, ReplayRequest, redrive},
};

struct ByBody;

impl Handler for ByBody {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        match &msg.body[..] {
            b"flaky" if parkway::Envelope::decode(&msg.headers).attempts == 0 => {
                Err(Failure::transient("DOWNSTREAM_TIMEOUT"))
            }
            b"bad" => Err(Failure::permanent("DESERIALIZATION_FAILED")),
            b"stale" => Err(Failure::new("STALE")),
            _ => Ok(()),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn documented_metrics_are_emitted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();

    let t = MemoryTransport::new("orders");
    for body in ["ok", "flaky", "bad", "stale"] {
        t.publish(Message::new("orders", body).with_id(body));
    }
    let policy = RetryPolicy::builder()
        .backoff(Backoff::fixed(Duration::from_secs(1)))
        .discard_on(["STALE"])
        .build()
        .unwrap();
    let worker = Worker::builder(Arc::new(t.clone()), ByBody)
        .policy(policy)
        .build()
        .unwrap();
    let idle = t.clone();
    worker.run(async move { idle.idle().await }).await.unwrap();
    let who = ReplayRequest::new("ops", "test").unwrap();
    let opts = RedriveOptions::default();
    let lot = t.parking_lot();
    let r = redrive(
        lot,
        &Filter::default(),
        &opts,
        &who,
        &EnvelopeLimits::default(),
    )
    .await
    .unwrap();
    assert_eq!(r.moved, 1);

    let snapshot = snapshotter.snapshot().into_vec();
    let seen: BTreeSet<String> = snapshot
        .iter()
        .map(|(k, _, _, _)| {
            let key = k.key();
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            format!("{}{{{}}}", key.name(), labels.join(","))
        })
        .collect();
    for expected in [
        "parkway_messages_total{transport=memory,outcome=acked}",
        "parkway_messages_total{transport=memory,outcome=retried}",
        "parkway_messages_total{transport=memory,outcome=parked}",
        "parkway_messages_total{transport=memory,outcome=discarded}",
        "parkway_retry_attempts_total{transport=memory,reason=DOWNSTREAM_TIMEOUT}",
        "parkway_parked_total{transport=memory,reason=DESERIALIZATION_FAILED}",
        "parkway_discarded_total{transport=memory,reason=STALE}",
        "parkway_handler_duration_seconds{transport=memory}",
        "parkway_retry_age_seconds{transport=memory}",
        "parkway_redrive_total{}",
    ] {
        assert!(seen.contains(expected), "missing {expected}; saw {seen:#?}");
    }
    let acked = snapshot.iter().find_map(|(k, _, _, v)| {
        (k.key().name() == "parkway_messages_total"
            && k.key().labels().any(|l| l.value() == "acked"))
        .then_some(v)
    });
    assert!(matches!(acked, Some(DebugValue::Counter(2))), "{acked:?}");
}
