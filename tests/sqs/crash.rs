//! Kill -9 the worker mid-run: 2,000 messages, 30 % failing once; every
//! message ends acked or parked, none lost.

use std::{
    collections::HashSet,
    process::{Child, Command},
    sync::Arc,
    time::Duration,
};

use parkway::{Backoff, Message, RetryPolicy, Transport, Worker};

use crate::conformance::harness::eventually;
use crate::crash_log::{Logging, logged_ids};

const N: usize = 2_000;

fn policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::fixed(Duration::from_secs(1)))
        .build()
        .unwrap()
}

async fn publish_all(t: &parkway_sqs::SqsTransport) {
    let mut sends = Vec::new();
    for i in 0..N {
        let t = t.clone();
        let body = if i % 10 < 3 { "fail:1" } else { "ok" };
        sends.push(async move {
            t.publish(&Message::new("crash", body).with_id(format!("m{i}")))
                .await
        });
        if sends.len() == 50 {
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

fn spawn_child(queue: &str, log: &std::path::Path) -> Killed {
    Killed(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "crash::kill_nine_mid_run_loses_nothing",
                "--nocapture",
            ])
            .env("PARKWAY_SQS_CHILD_QUEUE", queue)
            .env("PARKWAY_SQS_CHILD_LOG", log)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn child_config(queue: &str) -> parkway_sqs::SqsConfig {
    let mut c = crate::config_for(queue);
    c.visibility_timeout = Duration::from_secs(5);
    c
}

/// The child side: a worker on the given queue that runs until killed.
async fn child(queue: String, log: String) {
    let p = policy();
    let t = crate::connect(child_config(&queue), &p).await;
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
    if let (Ok(queue), Ok(log)) = (
        std::env::var("PARKWAY_SQS_CHILD_QUEUE"),
        std::env::var("PARKWAY_SQS_CHILD_LOG"),
    ) {
        return child(queue, log).await;
    }
    let p = policy();
    let name = format!("pw-kill9-{:08x}", fastrand::u32(..));
    let t = crate::connect(child_config(&name), &p).await;
    publish_all(&t).await;
    let log = std::env::temp_dir().join(format!("parkway-sqs-kill9-{name}.log"));
    let worker = spawn_child(&name, &log);
    eventually(Duration::from_secs(180), "a third processed", || async {
        logged_ids(&log, N).len() >= N / 3
    })
    .await;
    drop(worker); // SIGKILL: leases are not renewed, nothing is deleted
    let before = logged_ids(&log, N).len();
    let worker = spawn_child(&name, &log);
    let lot = t.parking_lot();
    eventually(
        Duration::from_secs(300),
        "every message processed or parked",
        || async {
            let done: HashSet<String> = logged_ids(&log, N).into_iter().collect();
            done.len() >= N
                || done.len() + lot.browse(usize::MAX).await.map(|v| v.len()).unwrap_or(0) >= N
        },
    )
    .await;
    drop(worker);
    let all = logged_ids(&log, N);
    let unique: HashSet<&String> = all.iter().collect();
    let parked = lot.browse(usize::MAX).await.unwrap();
    eprintln!(
        "kill -9: {} processed ({} lines; {} re-run after the kill, {before} done before it), {} parked",
        unique.len(),
        all.len(),
        all.len() - unique.len(),
        parked.len()
    );
    let mut accounted: HashSet<String> = unique.iter().map(|s| (*s).clone()).collect();
    accounted.extend(parked.into_iter().filter_map(|p| p.message.id));
    assert_eq!(accounted.len(), N, "none lost");
    let _ = std::fs::remove_file(&log);
    t.delete_queues().await.unwrap();
}
