//! The Kafka transport side by side with raw rdkafka, same broker, same run.
//!
//! 1. Happy path: N records over 3 partitions. Raw rdkafka (a
//!    `StreamConsumer`, commit after each record, async) vs the engine (a
//!    `Worker` on a `KafkaTransport`, handler `Ok`). Goal ≥ 0.95. Both
//!    clocks start after the first tenth of the records, so the group join
//!    (seconds on the test broker) is measured in neither.
//! 2. Delay precision: 300 records fail six times each on an exponential
//!    100 ms ×2 backoff with ±20 % jitter (capped at 5 s), through the retry
//!    tiers; error = time from a failure to the next run minus the decided
//!    delay. Goal p99 ≤ max(25 ms, 2 %).
//! 3. Pause-partition: records/s of the other partitions while one
//!    partition is retrying in place, ÷ three quarters of the rate with none
//!    paused (the share those partitions had). Goal ≥ 0.9. Both rates run
//!    from the first tenth of the successes to the last success.
//!
//! Needs the broker: `scripts/kafka-start`. `PARKWAY_BENCH_N` (default
//! 20 000), `PARKWAY_KAFKA_BOOTSTRAP`.
//!
//! Run: `cargo bench -p parkway-benches --bench kafka`
// A bench may abort on a setup failure, and its output is the point.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic
)]

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering as AtomicOrdering},
    },
    time::{Duration, Instant},
};

use parkway_benches::{Timing, precision_policy, precision_report};
use parkway_core::{Backoff, Failure, Handler, Message, Ordering, RetryPolicy, Worker};
use parkway_kafka::{KafkaConfig, KafkaTransport, create_topic};
use rdkafka::{
    ClientConfig, Message as _, Offset, TopicPartitionList,
    consumer::{CommitMode, Consumer, StreamConsumer},
};

fn bootstrap() -> String {
    std::env::var("PARKWAY_KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

fn suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        ^ std::process::id()
}

fn config(topic: &str) -> KafkaConfig {
    let mut c = KafkaConfig::new(bootstrap(), format!("{topic}-g"), topic);
    c.librdkafka.insert("fetch.wait.max.ms".into(), "10".into());
    c
}

async fn topic_with(
    n: u64,
    partitions: i32,
    policy: &RetryPolicy,
    body: impl Fn(u64) -> &'static str,
) -> (String, KafkaTransport) {
    let topic = format!("pw-bench-{:08x}", suffix());
    create_topic(&bootstrap(), &topic, partitions)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach Kafka at {}: {e}; run scripts/kafka-start",
                bootstrap()
            )
        });
    let t = KafkaTransport::connect(config(&topic), [policy])
        .await
        .unwrap();
    let mut sends = Vec::new();
    for i in 0..n {
        let t = t.clone();
        let b = body(i);
        sends.push(async move {
            t.publish(
                &Message::new("b", b)
                    .with_id(format!("m{i}"))
                    .with_key(format!("k{}", i % 97)),
            )
            .await
        });
        if sends.len() == 1000 {
            for r in futures_util::future::join_all(sends.drain(..)).await {
                r.unwrap();
            }
        }
    }
    for r in futures_util::future::join_all(sends).await {
        r.unwrap();
    }
    (topic, t)
}

async fn raw(topic: &str, n: u64) -> f64 {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", format!("{topic}-raw"))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "10")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let commit = |t: &str, p: i32, o: i64| {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(t, p, Offset::Offset(o + 1))
            .unwrap();
        consumer.commit(&tpl, CommitMode::Async).unwrap();
    };
    let warm = n / 10;
    let mut start = Instant::now();
    for seen in 0..n {
        let m = consumer.recv().await.unwrap();
        commit(m.topic(), m.partition(), m.offset());
        if seen + 1 == warm {
            start = Instant::now();
        }
    }
    (n - warm) as f64 / start.elapsed().as_secs_f64()
}

#[derive(Clone)]
struct Count {
    /// Runs before the clock starts (group join and first fetches excluded,
    /// the same for the raw consumer).
    warm: u64,
    runs: Arc<AtomicU64>,
    started: Arc<Mutex<Option<Instant>>>,
    /// When the latest record succeeded: a paused partition's share never
    /// completes, so rates run to the last success, not to a deadline.
    last: Arc<Mutex<Option<Instant>>>,
    fail_body: Option<&'static str>,
    per_partition: Arc<Mutex<HashMap<String, u64>>>,
}

impl Handler for Count {
    async fn handle(&self, m: &Message) -> Result<(), Failure> {
        if Some(&*String::from_utf8_lossy(&m.body)) == self.fail_body {
            return Err(Failure::transient("DOWNSTREAM_TIMEOUT"));
        }
        let key = m.key.clone().unwrap_or_default();
        *self.per_partition.lock().unwrap().entry(key).or_default() += 1;
        let now = Instant::now();
        if self.runs.fetch_add(1, AtomicOrdering::SeqCst) + 1 == self.warm {
            *self.started.lock().unwrap() = Some(now);
        }
        *self.last.lock().unwrap() = Some(now);
        Ok(())
    }
}

/// Runs a worker until `n` records succeeded; rate after the first tenth.
async fn engine(
    t: &KafkaTransport,
    policy: RetryPolicy,
    n: u64,
    fail_body: Option<&'static str>,
) -> (f64, Count) {
    let h = Count {
        warm: n / 10,
        runs: Arc::default(),
        started: Arc::default(),
        last: Arc::default(),
        fail_body,
        per_partition: Arc::default(),
    };
    let worker = Worker::builder(Arc::new(t.clone()), h.clone())
        .policy(policy)
        .concurrency(64)
        .build()
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    // Until `n` records succeeded, or until nothing succeeded for a second
    // (a paused partition's share never completes).
    let rate = loop {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let done = h.runs.load(AtomicOrdering::SeqCst);
        let started = *h.started.lock().unwrap();
        let last = *h.last.lock().unwrap();
        if let (Some(start), Some(last)) = (started, last)
            && (done >= n || last.elapsed() >= Duration::from_secs(1))
        {
            break (done - h.warm) as f64 / (last - start).as_secs_f64();
        }
    };
    let _ = tx.send(());
    running.await.unwrap().unwrap();
    t.close().await;
    (rate, h)
}

async fn precision() -> Vec<(Duration, Duration)> {
    let policy = precision_policy();
    let (_, t) = topic_with(300, 3, &policy, |_| "x").await;
    let h = Timing::default();
    let worker = Worker::builder(Arc::new(t.clone()), h.clone())
        .policy(policy)
        .concurrency(64)
        .build()
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    while !h.complete(300) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = tx.send(());
    running.await.unwrap().unwrap();
    t.close().await;
    h.samples()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let n = std::env::var("PARKWAY_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000u64);
        println!("Kafka-protocol broker at {} — N = {n}\n", bootstrap());
        let only = std::env::var("PARKWAY_BENCH_ONLY").unwrap_or_default();
        if only == "delay" {
            return delay_report().await;
        }
        let policy = RetryPolicy::builder().max_attempts(3).backoff(Backoff::fixed(Duration::from_secs(1))).build().unwrap();
        let (topic, t) = topic_with(n, 3, &policy, |_| "ok").await;
        let raw_rate = raw(&topic, n).await;
        let (eng_rate, _) = engine(&t, policy.clone(), n, None).await;
        println!("happy path     raw rdkafka consume + commit each: {raw_rate:>9.0} msgs/s");
        println!("happy path     engine (worker, handler Ok):       {eng_rate:>9.0} msgs/s");
        println!("happy path     ratio engine/raw:                  {:>9.3}  (goal ≥ 0.95)\n", eng_rate / raw_rate);
        if only == "happy" {
            return;
        }

        // Pause-partition: 4 partitions by key; one key keeps failing.
        let ordered = RetryPolicy::builder()
            .max_attempts(1000)
            .backoff(Backoff::fixed(Duration::from_millis(100)))
            .ordering(Ordering::Ordered)
            .build()
            .unwrap();
        let m = n / 2;
        let (_, calm) = topic_with(m, 4, &ordered, |_| "ok").await;
        let (calm_rate, _) = engine(&calm, ordered.clone(), m, None).await;
        // Same load, but every record of one key fails forever: its
        // partition retries in place; the others must keep flowing.
        let (_, stuck) = topic_with(m, 4, &ordered, |i| if i % 97 == 0 { "stuck" } else { "ok" }).await;
        let healthy = m - m.div_ceil(97);
        let (stuck_rate, h) = engine(&stuck, ordered, healthy, Some("stuck")).await;
        let partitions_done = h.per_partition.lock().unwrap().len();
        println!("pause-partition  4 partitions, none paused:      {calm_rate:>9.0} msgs/s");
        println!("pause-partition  one partition retrying in place: {stuck_rate:>9.0} msgs/s of the other partitions");
        println!(
            "pause-partition  ratio vs the share they had (3/4): {:>9.3}  (goal ≥ 0.9; {partitions_done} keys flowed)\n",
            stuck_rate / (calm_rate * 0.75)
        );

        if only != "pause" {
            delay_report().await;
        }
    });
}

async fn delay_report() {
    let samples = precision().await;
    println!(
        "delay error    {} retries, delays 80 ms – 5 s (exp ×2, ±20 % jitter), tier topics 1s/10s",
        samples.len()
    );
    for line in precision_report(samples) {
        println!("{line}");
    }
}
