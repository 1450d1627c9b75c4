//! A broker restart mid-run: every message ends acked or parked.

use std::{path::Path, process::Command, time::Duration};

use parkway::{Backoff, RetryPolicy};
use parkway_rabbitmq::{RabbitConfig, RabbitTransport};

use crate::conformance::{
    Queue,
    harness::{eventually, finish, start},
};

const PORT: u16 = 5679;
const N: usize = 10_000;

fn node(cmd: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/rabbitmq-node");
    let status = Command::new(&script)
        .args([cmd, &PORT.to_string()])
        .status();
    assert!(
        status.as_ref().is_ok_and(|s| s.success()),
        "{} {cmd} {PORT} failed: {status:?} (it needs rabbitmq-server: run scripts/rabbitmq-start)",
        script.display()
    );
}

struct StopNode;
impl Drop for StopNode {
    fn drop(&mut self) {
        node("stop");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restart_mid_run_loses_nothing() {
    node("start");
    let _stop = StopNode;
    let url = format!("amqp://guest:guest@127.0.0.1:{PORT}/%2f");
    let p = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::fixed(Duration::from_millis(300)))
        .build()
        .unwrap();
    let config = RabbitConfig::new(&url, format!("pw-restart-{:08x}", fastrand::u32(..)));
    let t = RabbitTransport::connect(config, [&p])
        .await
        .expect("test node reachable");
    // 30 % fail transiently once.
    let mut pending = Vec::with_capacity(N);
    for i in 0..N {
        let body = if i % 10 < 3 { "fail:1" } else { "ok" };
        let t = t.clone();
        pending.push(async move {
            t.publish(&parkway::Message::new("restart", body).with_id(format!("m{i}")))
                .await
        });
        if pending.len() == 200 {
            for r in futures_util::future::join_all(pending.drain(..)).await {
                r.unwrap();
            }
        }
    }
    for r in futures_util::future::join_all(pending).await {
        r.unwrap();
    }
    let q = Queue {
        transport: std::sync::Arc::new(t.clone()),
        publisher: std::sync::Arc::new(crate::Producer(t.clone())),
    };
    let w = start(&q, p);
    eventually(
        Duration::from_secs(60),
        "a third of the messages done",
        || async { w.record.successes().len() >= N / 3 },
    )
    .await;
    node("restart");
    let done = |w: &crate::conformance::harness::Running| {
        let mut ids = w.record.successes();
        ids.sort();
        ids.dedup();
        ids.len()
    };
    // Not `eventually`: on a timeout this says how far it got, which
    // messages are missing and where the broker holds what.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    while done(&w) + q.parked().await.len() < N {
        if tokio::time::Instant::now() >= deadline {
            let mut seen: std::collections::HashSet<String> =
                w.record.successes().into_iter().collect();
            seen.extend(q.parked().await.into_iter().filter_map(|m| m.message.id));
            let missing: Vec<String> = (0..N)
                .map(|i| format!("m{i}"))
                .filter(|id| !seen.contains(id))
                .take(10)
                .collect();
            let queues =
                Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/rabbitmq-node"))
                    .args(["queues", &PORT.to_string()])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
            panic!(
                "after the restart, 180 s: {} processed, {} parked of {N}; first missing {missing:?}; \
                 runs of the first: {:?}; worker running: {}; queues:\n{queues}",
                done(&w),
                q.parked().await.len(),
                missing.first().map(|id| w.record.runs(id).len()),
                w.is_running(),
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let unique = done(&w);
    let parked = q.parked().await.len();
    let duplicates = w.record.successes().len() - unique;
    eprintln!(
        "restart: {unique} processed, {parked} parked, {duplicates} duplicates (at-least-once)"
    );
    assert_eq!(unique + parked, N);
    finish(w, &q).await;
}
