//! Workers die and groups rebalance: nothing is lost, nothing is committed
//! past an unfinished record.

use std::{
    collections::HashSet,
    process::{Child, Command},
    sync::Arc,
    time::Duration,
};

use parkway::{Backoff, Message, RetryPolicy, Worker};

use crate::conformance::{
    Queue,
    harness::{eventually, finish, start},
};
use crate::crash_log::{Logging, logged_ids};

const N: usize = 10_000;

fn policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::fixed(Duration::from_millis(300)))
        .build()
        .unwrap()
}

async fn publish_all(t: &parkway_kafka::KafkaTransport) {
    let mut sends = Vec::new();
    for i in 0..N {
        let t = t.clone();
        let body = if i % 10 < 3 { "fail:1" } else { "ok" };
        sends.push(async move {
            t.publish(
                &Message::new("crash", body)
                    .with_id(format!("m{i}"))
                    .with_key(format!("k{}", i % 13)),
            )
            .await
        });
        if sends.len() == 500 {
            for r in futures_util::future::join_all(sends.drain(..)).await {
                r.unwrap();
            }
        }
    }
    for r in futures_util::future::join_all(sends).await {
        r.unwrap();
    }
}

/// Kills the child worker however the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_child(topic: &str, log: &std::path::Path) -> Killed {
    Killed(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "crash::kill_nine_mid_run_loses_nothing",
                "--nocapture",
            ])
            .env("PARKWAY_KAFKA_CHILD_TOPIC", topic)
            .env("PARKWAY_KAFKA_CHILD_LOG", log)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// The child side: a worker on the given topic that runs until killed.
async fn child(topic: String, log: String) {
    let mut config =
        parkway_kafka::KafkaConfig::new(crate::bootstrap(), format!("{topic}-group"), topic);
    config
        .librdkafka
        .insert("session.timeout.ms".into(), "6000".into());
    // The rebalance timeout: how long the group waits for a dead member to
    // rejoin before it moves on.
    config
        .librdkafka
        .insert("max.poll.interval.ms".into(), "10000".into());
    let p = policy();
    let t = parkway_kafka::KafkaTransport::connect(config, [&p])
        .await
        .unwrap();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let handler = Logging {
        log: std::sync::Mutex::new(file),
        failed: Default::default(),
    };
    let worker = Worker::builder(Arc::new(t), handler)
        .policy(p)
        .concurrency(32)
        .build()
        .unwrap();
    worker.run(std::future::pending()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_nine_mid_run_loses_nothing() {
    if let (Ok(topic), Ok(log)) = (
        std::env::var("PARKWAY_KAFKA_CHILD_TOPIC"),
        std::env::var("PARKWAY_KAFKA_CHILD_LOG"),
    ) {
        return child(topic, log).await;
    }
    let p = policy();
    let t = crate::transport(&p, 3, |_| {}).await;
    let topic = t.topic();
    publish_all(&t).await;
    let log = std::env::temp_dir().join(format!("parkway-kill9-{topic}.log"));
    let worker = spawn_child(&topic, &log);
    eventually(Duration::from_secs(120), "a third processed", || async {
        logged_ids(&log, N).len() >= N / 3
    })
    .await;
    drop(worker); // SIGKILL: no shutdown, no final commit
    let before = logged_ids(&log, N).len();
    let worker = spawn_child(&topic, &log);
    let lot = parkway::Transport::parking_lot(&t);
    eventually(
        Duration::from_secs(300),
        "every record processed or parked",
        || async {
            let done: HashSet<String> = logged_ids(&log, N).into_iter().collect();
            let parked = lot.browse(usize::MAX).await.map(|v| v.len()).unwrap_or(0);
            done.len() + parked >= N
        },
    )
    .await;
    drop(worker);
    let all = logged_ids(&log, N);
    let unique: HashSet<&String> = all.iter().collect();
    eprintln!(
        "kill -9: {} processed ({} lines; {} duplicates re-run after the kill, {before} done before it)",
        unique.len(),
        all.len(),
        all.len() - unique.len()
    );
    assert_eq!(unique.len(), N, "none lost");
    let _ = std::fs::remove_file(&log);
    t.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebalance_mid_retries_loses_nothing() {
    let p = policy();
    let a = crate::transport(&p, 4, |_| {}).await;
    publish_all(&a).await;
    let qa = Queue {
        transport: Arc::new(a.clone()),
        publisher: Arc::new(crate::Producer(a.clone())),
    };
    let wa = start(&qa, p.clone());
    eventually(
        Duration::from_secs(60),
        "some retries in flight",
        || async { wa.record.successes().len() >= N / 5 },
    )
    .await;
    // A second member joins the group: partitions move mid-retry.
    let topic = a.topic();
    let mut config =
        parkway_kafka::KafkaConfig::new(crate::bootstrap(), format!("{topic}-group"), topic);
    config
        .librdkafka
        .insert("session.timeout.ms".into(), "6000".into());
    config
        .librdkafka
        .insert("max.poll.interval.ms".into(), "10000".into());
    let b = parkway_kafka::KafkaTransport::connect(config, [&p])
        .await
        .unwrap();
    let qb = Queue {
        transport: Arc::new(b.clone()),
        publisher: Arc::new(crate::Producer(b.clone())),
    };
    let wb = start(&qb, p);
    let done = |wa: &crate::conformance::harness::Running,
                wb: &crate::conformance::harness::Running| {
        let mut ids: HashSet<String> = wa.record.successes().into_iter().collect();
        ids.extend(wb.record.successes());
        ids.len()
    };
    eventually(
        Duration::from_secs(300),
        "every record processed by one member or the other",
        || async { done(&wa, &wb) + qa.parked().await.len() >= N },
    )
    .await;
    assert_eq!(done(&wa, &wb), N, "none lost, none parked");
    let b_share = wb.record.successes().len();
    eprintln!("rebalance: member b processed {b_share} after joining");
    finish(wb, &qb).await;
    finish(wa, &qa).await;
}
