//! The RabbitMQ transport side by side with raw lapin, same broker, same run.
//!
//! 1. Happy path: consume + ack N messages, prefetch P. Raw lapin (one
//!    consumer, ack each delivery) vs the engine (a `Worker` on a
//!    `RabbitTransport` whose handler returns `Ok`). Goal ≥ 0.95.
//! 2. Retry path: raw "consume, publish a copy with confirm, ack", with up
//!    to P deliveries in flight, into a queue shaped like a wait queue (TTL +
//!    dead-letter route), vs the engine retrying every message into a
//!    10-minute wait tier. The goal (≥ 0.90) is against a raw copy carrying
//!    the same header bytes as the engine's envelope; the ratio against a
//!    bare copy is printed too (the broker's cost of those bytes).
//! 3. Delay precision: 300 messages fail six times each on an exponential
//!    100 ms ×2 backoff with ±20 % jitter (capped at 5 s): the error is the
//!    time from a failure to the next run minus the delay the engine
//!    decided. Goal p99 ≤ max(25 ms, 2 % of the delay).
//!
//! Needs the broker: `scripts/rabbitmq-start`. `PARKWAY_BENCH_N` (default
//! 20 000), `PARKWAY_BENCH_PREFETCH` (default 64), `PARKWAY_RABBITMQ_URL`.
//!
//! Run: `cargo bench -p parkway-benches --bench rabbitmq`
// A bench may abort on a setup failure, and its output is the point.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic
)]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures_util::StreamExt;
use lapin::{
    BasicProperties, Connection, ConnectionProperties,
    options::{
        BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
        ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
    },
    types::FieldTable,
};
use parkway_benches::{Timing, env_or, precision_policy, precision_report};
use parkway_core::{Backoff, Envelope, Failure, Handler, Message, RetryPolicy, Worker};
use parkway_rabbitmq::{RabbitConfig, RabbitTransport};

fn url() -> String {
    std::env::var("PARKWAY_RABBITMQ_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

async fn connect() -> Connection {
    Connection::connect(&url(), ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach RabbitMQ at {}: {e}; run scripts/rabbitmq-start",
                url()
            )
        })
}

/// Fills `queue` (via the default exchange) with `n` persistent messages.
async fn fill(conn: &Connection, queue: &str, n: u64) {
    let ch = conn.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let props = BasicProperties::default().with_delivery_mode(2);
    for i in 0..n {
        let p = props.clone().with_message_id(format!("m{i}").into());
        ch.basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            b"{\"order\":1}",
            p,
        )
        .await
        .unwrap();
        if i % 1000 == 999 {
            ch.wait_for_confirms().await.unwrap();
        }
    }
    ch.wait_for_confirms().await.unwrap();
}

async fn raw_queue(conn: &Connection, name: &str) {
    declare(conn, name, FieldTable::default()).await;
}

/// The raw retry path's sink is shaped like the engine's wait queue (a TTL
/// and a dead-letter route), so both ask the broker for the same work.
async fn wait_like_queue(conn: &Connection, name: &str, back_to: &str) {
    let mut args = FieldTable::default();
    args.insert(
        "x-message-ttl".into(),
        lapin::types::AMQPValue::LongLongInt(600_000),
    );
    args.insert(
        "x-dead-letter-exchange".into(),
        lapin::types::AMQPValue::LongString("".into()),
    );
    args.insert(
        "x-dead-letter-routing-key".into(),
        lapin::types::AMQPValue::LongString(back_to.into()),
    );
    declare(conn, name, args).await;
}

async fn declare(conn: &Connection, name: &str, args: FieldTable) {
    let ch = conn.create_channel().await.unwrap();
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(name.into(), durable, args).await.unwrap();
}

async fn delete(conn: &Connection, name: &str) {
    let ch = conn.create_channel().await.unwrap();
    let _ = ch
        .queue_delete(name.into(), QueueDeleteOptions::default())
        .await;
}

/// Raw lapin: consume + ack, or consume + publish copy (confirmed) + ack.
async fn raw(
    conn: &Connection,
    n: u64,
    prefetch: u16,
    copy_to: Option<&str>,
    envelope: bool,
) -> f64 {
    let queue = format!("pw-bench-raw-{:08x}", fastrand_u32());
    raw_queue(conn, &queue).await;
    if let Some(sink) = copy_to {
        wait_like_queue(conn, sink, &queue).await;
    }
    fill(conn, &queue, n).await;
    let ch = conn.create_channel().await.unwrap();
    ch.basic_qos(prefetch, BasicQosOptions::default())
        .await
        .unwrap();
    let publish = conn.create_channel().await.unwrap();
    publish
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let mut consumer = ch
        .basic_consume(
            queue.as_str().into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let start = Instant::now();
    let mut in_flight = futures_util::stream::FuturesUnordered::new();
    let mut done = 0;
    while done < n {
        tokio::select! {
            Some(d) = consumer.next() => {
                let d = d.unwrap();
                let publish = publish.clone();
                let sink = copy_to.map(str::to_owned);
                let props = if envelope { with_envelope(&d.properties) } else { d.properties.clone() };
                in_flight.push(async move {
                    if let Some(sink) = sink {
                        publish
                            .basic_publish("".into(), sink.as_str().into(), BasicPublishOptions { mandatory: true, immediate: false }, &d.data, props)
                            .await
                            .unwrap()
                            .await
                            .unwrap();
                    }
                    d.acker.ack(BasicAckOptions::default()).await.unwrap();
                });
            }
            Some(()) = in_flight.next(), if !in_flight.is_empty() => done += 1,
        }
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    delete(conn, &queue).await;
    if let Some(sink) = copy_to {
        delete(conn, sink).await;
    }
    rate
}

/// The copy's properties with a header table the size of a Parkway
/// envelope (the same bytes the engine sends), built by the same codec.
fn with_envelope(p: &BasicProperties) -> BasicProperties {
    let env = Envelope {
        attempts: 1,
        first_failure_at: Some(std::time::SystemTime::now()),
        last_failure_at: Some(std::time::SystemTime::now()),
        total_delay: Duration::from_secs(600),
        last_delay: Some(Duration::from_secs(600)),
        due_at: Some(std::time::SystemTime::now()),
        class: Some(parkway_core::FailureClass::Transient),
        reason: Some("DOWNSTREAM_TIMEOUT".into()),
        last_error: Some("DOWNSTREAM_TIMEOUT".into()),
        origin: parkway_core::Origin {
            queue: Some("pw-bench-raw".into()),
            partition: None,
            offset: None,
        },
        message_id: Some("m1".into()),
        ..Envelope::default()
    };
    let mut h = parkway_core::Headers::new();
    env.encode(&mut h, &parkway_core::EnvelopeLimits::default());
    let mut t = FieldTable::default();
    for (k, v) in h.iter() {
        t.insert(k.into(), lapin::types::AMQPValue::LongString(v.into()));
    }
    p.clone().with_headers(t)
}

fn fastrand_u32() -> u32 {
    (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        ^ std::process::id())
    .rotate_left(7)
}

/// Counts handler runs; fails every run when `fail` is set.
#[derive(Clone)]
struct Counting {
    fail: bool,
    runs: Arc<std::sync::atomic::AtomicU64>,
    done: Arc<tokio::sync::Notify>,
    target: u64,
}

impl Handler for Counting {
    async fn handle(&self, _m: &Message) -> Result<(), Failure> {
        let n = self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if n == self.target {
            self.done.notify_one();
        }
        if self.fail {
            Err(Failure::transient("DOWNSTREAM_TIMEOUT"))
        } else {
            Ok(())
        }
    }
}

/// The engine: a worker on a RabbitTransport until `n` messages are settled.
async fn engine(conn: &Connection, n: u64, prefetch: u16, fail: bool) -> f64 {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_secs(600)))
        .build()
        .unwrap();
    let mut config = RabbitConfig::new(url(), format!("pw-bench-engine-{:08x}", fastrand_u32()));
    config.prefetch = prefetch;
    let transport = RabbitTransport::connect(config, [&policy]).await.unwrap();
    let queue = transport.names().queue.clone();
    fill(conn, &queue, n).await;
    let handler = Counting {
        fail,
        runs: Arc::default(),
        done: Arc::default(),
        target: n,
    };
    let done = handler.done.clone();
    let worker = Worker::builder(Arc::new(transport.clone()), handler.clone())
        .policy(policy)
        .concurrency(usize::from(prefetch))
        .build()
        .unwrap();
    let start = Instant::now();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    done.notified().await;
    // The last handler run has returned; its settlement follows: stop, which
    // waits for every in-flight settlement to finish.
    let _ = tx.send(());
    let summary = running.await.unwrap().unwrap();
    let rate = n as f64 / start.elapsed().as_secs_f64();
    assert_eq!(summary.acked + summary.retried, n, "{summary:?}");
    transport.delete_topology().await.unwrap();
    transport.close().await;
    rate
}

async fn precision(conn: &Connection) -> (Vec<(Duration, Duration)>, usize) {
    let policy = precision_policy();
    let config = RabbitConfig::new(url(), format!("pw-bench-delay-{:08x}", fastrand_u32()));
    let transport = RabbitTransport::connect(config, [&policy]).await.unwrap();
    let tiers = transport.plan().tiers().len();
    fill(conn, &transport.names().queue, 300).await;
    let handler = Timing::default();
    let worker = Worker::builder(Arc::new(transport.clone()), handler.clone())
        .policy(policy)
        .concurrency(64)
        .build()
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    while !handler.complete(300) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = tx.send(());
    running.await.unwrap().unwrap();
    transport.delete_topology().await.unwrap();
    transport.close().await;
    (handler.samples(), tiers)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let n = env_or("PARKWAY_BENCH_N", 20_000);
        let prefetch = u16::try_from(env_or("PARKWAY_BENCH_PREFETCH", 64)).unwrap_or(64);
        let conn = connect().await;
        println!("RabbitMQ at {} — N = {n}, prefetch {prefetch}, 2 rounds each (best kept)\n", url().split('@').next_back().unwrap_or(""));

        let only = std::env::var("PARKWAY_BENCH_ONLY").unwrap_or_default();
        let mut raw_ok: f64 = 0.0;
        let mut eng_ok: f64 = 0.0;
        for _ in 0..if only.is_empty() || only == "happy" { 2 } else { 0 } {
            raw_ok = raw_ok.max(raw(&conn, n, prefetch, None, false).await);
            eng_ok = eng_ok.max(engine(&conn, n, prefetch, false).await);
        }
        if raw_ok > 0.0 {
            println!("happy path   raw lapin consume+ack:            {raw_ok:>9.0} msgs/s");
            println!("happy path   engine (worker, handler Ok):      {eng_ok:>9.0} msgs/s");
            println!("happy path   ratio engine/raw:                 {:>9.3}  (goal ≥ 0.95)\n", eng_ok / raw_ok);
        }

        let mut raw_bare: f64 = 0.0;
        let mut raw_retry: f64 = 0.0;
        let mut eng_retry: f64 = 0.0;
        for _ in 0..if only.is_empty() || only == "retry" { 2 } else { 0 } {
            let sink = format!("pw-bench-sink-{:08x}", fastrand_u32());
            raw_bare = raw_bare.max(raw(&conn, n, prefetch, Some(&sink), false).await);
            let sink = format!("pw-bench-sink-{:08x}", fastrand_u32());
            raw_retry = raw_retry.max(raw(&conn, n, prefetch, Some(&sink), true).await);
            eng_retry = eng_retry.max(engine(&conn, n, prefetch, true).await);
        }
        if raw_retry > 0.0 {
            println!("retry path   raw consume+publish(confirm)+ack, copy with the envelope's bytes: {raw_retry:>9.0} msgs/s");
            println!("retry path   raw consume+publish(confirm)+ack, bare copy (no headers):         {raw_bare:>9.0} msgs/s");
            println!("retry path   engine (every message retried into a wait tier):                 {eng_retry:>9.0} msgs/s");
            println!("retry path   ratio engine/raw (same bytes):                                   {:>9.3}  (goal ≥ 0.90)", eng_retry / raw_retry);
            println!("retry path   ratio engine/raw (bare copy; the envelope's cost at the broker): {:>9.3}\n", eng_retry / raw_bare);
        }

        if !(only.is_empty() || only == "delay") {
            return;
        }
        let (samples, tiers) = precision(&conn).await;
        println!("delay error  {} retries, delays 80 ms – 5 s (exp ×2, ±20 % jitter), {tiers} wait tiers", samples.len());
        for line in precision_report(samples) {
            println!("{line}");
        }
    });
}
