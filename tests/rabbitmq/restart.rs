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
    eventually(
        Duration::from_secs(180),
        "every message acked or parked",
        || async { done(&w) + q.parked().await.len() >= N },
    )
    .await;
    let unique = done(&w);
    let parked = q.parked().await.len();
    let duplicates = w.record.successes().len() - unique;
    eprintln!(
        "restart: {unique} processed, {parked} parked, {duplicates} duplicates (at-least-once)"
    );
    assert_eq!(unique + parked, N);
    finish(w, &q).await;
}
