//! The SQS transport side by side with a raw aws-sdk-sqs loop, same
//! emulator, same run.
//!
//! 1. Happy path: N messages. Raw: `pollers` loops of ReceiveMessage (10)
//!    then DeleteMessageBatch. Engine: a `Worker` on an `SqsTransport` with
//!    the same pollers and batch size, handler `Ok`. Goal ≥ 0.95 (the
//!    emulator, not the engine, should be the limit).
//! 2. Back-off precision: 100 messages fail six times each on an
//!    exponential 100 ms ×2 backoff with ±20 % jitter (capped at 5 s):
//!    delays from 2 s by ChangeMessageVisibility (a second early, the rest
//!    waited out from the due time), shorter ones held in process; error =
//!    time from a failure to the next run minus the decided delay.
//!
//! Needs the emulator: `scripts/sqs-start`. `PARKWAY_BENCH_N` (default
//! 3 000), `PARKWAY_SQS_ENDPOINT`.
//!
//! Run: `cargo bench -p parkway-benches --bench sqs`
// A bench may abort on a setup failure, and its output is the point.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic
)]

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering as AtomicOrdering},
    },
    time::{Duration, Instant},
};

use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use parkway_benches::{Timing, env_or, precision_policy, precision_report};
use parkway_core::{Backoff, Failure, Handler, Message, RetryPolicy, Worker};
use parkway_sqs::{CredentialSource, SqsConfig, SqsTransport};

/// Long polls in parallel, for the raw loop and the transport alike.
const POLLERS: usize = 4;
/// Messages per receive, for both.
const BATCH: i32 = 10;

fn endpoint() -> String {
    std::env::var("PARKWAY_SQS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:4566".into())
}

fn config(name: &str) -> SqsConfig {
    let mut c = SqsConfig::new(name);
    c.endpoint = Some(endpoint());
    c.region = Some("us-east-1".into());
    c.credentials = CredentialSource::Emulator;
    c.wait_time = Duration::from_secs(1);
    c.pollers = POLLERS;
    c.max_in_flight = 64;
    c
}

async fn client() -> aws_sdk_sqs::Client {
    let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(endpoint())
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "bench", "bench", None, None, "bench",
        ))
        .load()
        .await;
    aws_sdk_sqs::Client::new(&conf)
}

/// Fresh queues filled with `n` messages (ten per send, 16 sends at once).
async fn filled(n: u64, policy: &RetryPolicy, body: &str) -> SqsTransport {
    let name = format!("pw-bench-{:08x}", fastrand_u32());
    let t = SqsTransport::connect(config(&name), [policy])
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach the SQS emulator at {}: {e}; run scripts/sqs-start",
                endpoint()
            )
        });
    let c = client().await;
    let url = t.queue_url().to_owned();
    let mut sends = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(10) {
        let mut req = c.send_message_batch().queue_url(&url);
        for i in chunk {
            let id_attr = aws_sdk_sqs::types::MessageAttributeValue::builder()
                .data_type("String")
                .string_value(format!("m{i}"))
                .build()
                .unwrap();
            req = req.entries(
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(body)
                    .message_attributes(parkway_sqs::MESSAGE_ID, id_attr)
                    .build()
                    .unwrap(),
            );
        }
        sends.push(req.send());
        if sends.len() == 16 {
            for r in futures_util::future::join_all(sends.drain(..)).await {
                assert!(r.unwrap().failed().is_empty());
            }
        }
    }
    for r in futures_util::future::join_all(sends).await {
        assert!(r.unwrap().failed().is_empty());
    }
    t
}

fn fastrand_u32() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        ^ std::process::id()
}

/// `POLLERS` loops of receive 10 + delete batch until `n` are deleted.
async fn raw(url: &str, n: u64) -> f64 {
    let c = client().await;
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut loops = Vec::new();
    for _ in 0..POLLERS {
        let (c, url, done) = (c.clone(), url.to_owned(), done.clone());
        loops.push(tokio::spawn(async move {
            while done.load(AtomicOrdering::SeqCst) < n {
                let out = c
                    .receive_message()
                    .queue_url(&url)
                    .max_number_of_messages(BATCH)
                    .wait_time_seconds(1)
                    .message_attribute_names("All")
                    .send()
                    .await
                    .unwrap();
                let msgs = out.messages.unwrap_or_default();
                if msgs.is_empty() {
                    continue;
                }
                let mut del = c.delete_message_batch().queue_url(&url);
                for (i, m) in msgs.iter().enumerate() {
                    del = del.entries(
                        aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                            .id(i.to_string())
                            .receipt_handle(m.receipt_handle().unwrap())
                            .build()
                            .unwrap(),
                    );
                }
                let out = del.send().await.unwrap();
                done.fetch_add(out.successful().len() as u64, AtomicOrdering::SeqCst);
            }
        }));
    }
    for l in loops {
        l.await.unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

#[derive(Clone, Default)]
struct Count {
    runs: Arc<AtomicU64>,
}

impl Handler for Count {
    async fn handle(&self, _: &Message) -> Result<(), Failure> {
        self.runs.fetch_add(1, AtomicOrdering::SeqCst);
        Ok(())
    }
}

/// A worker until `n` messages are handled and deleted.
async fn engine(t: &SqsTransport, policy: RetryPolicy, n: u64) -> f64 {
    let h = Count::default();
    let worker = Worker::builder(Arc::new(t.clone()), h.clone())
        .policy(policy)
        .concurrency(64)
        .build()
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let start = Instant::now();
    let running = tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    // Handled and settled: nothing left in flight.
    while h.runs.load(AtomicOrdering::SeqCst) < n || t.in_flight() > 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let _ = tx.send(());
    running.await.unwrap().unwrap();
    rate
}

async fn precision(n: u64) -> Vec<(Duration, Duration)> {
    let policy = precision_policy();
    let t = filled(n, &policy, "x").await;
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
    while !h.complete(n as usize) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = tx.send(());
    running.await.unwrap().unwrap();
    t.delete_queues().await.unwrap();
    h.samples()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let n = env_or("PARKWAY_BENCH_N", 3_000);
        println!("SQS emulator at {} — N = {n}, {POLLERS} pollers × {BATCH}\n", endpoint());
        let policy = RetryPolicy::builder().max_attempts(3).backoff(Backoff::fixed(Duration::from_secs(1))).build().unwrap();
        let rates = Mutex::new((Vec::new(), Vec::new()));
        // Two rounds, alternating, so neither side gets a warmer emulator.
        for _ in 0..2 {
            let a = filled(n, &policy, "ok").await;
            let r = raw(a.queue_url(), n).await;
            a.delete_queues().await.unwrap();
            let b = filled(n, &policy, "ok").await;
            let e = engine(&b, policy.clone(), n).await;
            b.delete_queues().await.unwrap();
            let mut g = rates.lock().unwrap();
            g.0.push(r);
            g.1.push(e);
        }
        let (raws, engs) = rates.into_inner().unwrap();
        let raw_rate = raws.iter().sum::<f64>() / raws.len() as f64;
        let eng_rate = engs.iter().sum::<f64>() / engs.len() as f64;
        println!("happy path     raw receive(10) + DeleteMessageBatch: {raw_rate:>7.0} msgs/s  (rounds {raws:.0?})");
        println!("happy path     engine (worker, handler Ok):          {eng_rate:>7.0} msgs/s  (rounds {engs:.0?})");
        println!("happy path     ratio engine/raw:                     {:>7.3}  (goal ≥ 0.95)\n", eng_rate / raw_rate);
        if std::env::var("PARKWAY_BENCH_ONLY").as_deref() == Ok("happy") {
            return;
        }
        let samples = precision(100).await;
        let by_visibility = samples.iter().filter(|(d, _)| *d >= Duration::from_secs(2)).count();
        println!(
            "delay error    {} retries, delays 80 ms – 5 s (exp ×2, ±20 % jitter): {by_visibility} by ChangeMessageVisibility (≥ 2 s), the rest held in process",
            samples.len()
        );
        let visibility: Vec<_> = samples.iter().filter(|(d, _)| *d >= Duration::from_secs(2)).copied().collect();
        for line in precision_report(samples) {
            println!("{line}");
        }
        println!("visibility back-off only (delays ≥ 2 s):");
        for line in precision_report(visibility) {
            println!("{line}");
        }
    });
}
