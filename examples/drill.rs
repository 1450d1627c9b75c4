//! Seed 000's practice drill, on whichever transport the config names:
//!
//! 1. a payment times out on its first three attempts: retried with growing
//!    delays, then succeeds;
//! 2. a JSON mapping error (`"amount": "12.50"`) is parked at once;
//! 3. (a consumer killed between the retry publish and the ack loses
//!    nothing: the broker fault tests in `tests/rabbitmq/faults.rs`,
//!    `tests/kafka/crash.rs` and `tests/sqs/crash.rs` cover it);
//! 4. the handler is fixed, the parked payment is replayed (a filtered
//!    redrive) and applied; sent again, it is acknowledged as a duplicate;
//! 5. 1,000 poison messages do not starve 50 healthy ones.
//!
//! ```sh
//! cargo run --example drill -- --config examples/config/memory.toml
//! cargo run --example drill --features rabbitmq -- --config examples/config/rabbitmq.toml
//! cargo run --example drill --features kafka -- --config examples/config/kafka.toml
//! cargo run --example drill --features sqs -- --config examples/config/sqs.toml
//! ```
//!
//! With `--serve` it only runs the worker (on the config's own queue or
//! topic, no suffix) and prints every step, so any AMQP, Kafka or SQS client
//! can drive it with the bodies documented in `examples/support/handler.rs`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "support/mod.rs"]
mod support;

use std::{
    process::ExitCode,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use parkway::{
    Message, Worker,
    config::Config,
    redrive::{Filter, RedriveOptions, ReplayRequest, redrive},
};
use support::{
    broker,
    handler::Payments,
    outcomes::{End, Outcomes},
};

const POISON: usize = 1_000;
const HEALTHY: usize = 50;

struct Args {
    config: String,
    serve: bool,
}

fn args() -> Result<Args, String> {
    let mut config = None;
    let mut serve = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" => config = it.next(),
            "--serve" => serve = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args {
        config: config.ok_or("usage: drill --config FILE [--serve]")?,
        serve,
    })
}

/// Prints a check and remembers whether it held.
struct Checks(bool);

impl Checks {
    fn check(&mut self, ok: bool, what: &str) {
        println!("  [{}] {what}", if ok { "PASS" } else { "FAIL" });
        self.0 &= ok;
    }
}

async fn drill(mut config: Config) -> Result<bool, Box<dyn std::error::Error>> {
    let run = broker::per_run(&mut config);
    println!("drill on {} (run {run})\n", config.transport.kind);
    let opened = broker::open(&config, 2).await?;
    let p = &opened.producer;
    p.publish(msg(
        "timeout",
        r#"{"payment":"d-1","amount":5,"timeout":3}"#,
    ))
    .await?;
    p.publish(msg("mapping", r#"{"payment":"d-2","amount":"12.50"}"#))
        .await?;
    let flood_started = Instant::now();
    for i in 0..POISON {
        p.publish(
            // Not JSON, and still a body every broker carries (SQS refuses
            // control characters such as NUL).
            Message::new("payments", "poison: not json")
                .with_id(format!("poison-{i}"))
                .with_type("poison"),
        )
        .await?;
        if i % (POISON / HEALTHY) == 0 {
            let body = format!(r#"{{"payment":"h-{i}","amount":1}}"#);
            p.publish(msg(&format!("healthy-{i}"), &body)).await?;
        }
    }
    println!("published 2 drill payments, {POISON} poison and {HEALTHY} healthy messages");

    let handler = Payments::default();
    let outcomes = Outcomes::default();
    let runs: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let (seen, timeout_runs) = (outcomes.clone(), runs.clone());
    let worker = Worker::builder(opened.transport.clone(), handler.clone())
        .config(&config)
        .observer(move |step| {
            if step.message_id.as_deref() == Some("timeout") {
                if let Ok(mut r) = timeout_runs.lock() {
                    r.push(Instant::now());
                }
            }
            seen.record(step);
        })
        .build()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));

    let total = 2 + POISON + HEALTHY;
    let mut c = Checks(true);
    let ended = outcomes.wait_ended(total, Duration::from_secs(180)).await;
    let healthy_done = flood_started.elapsed();
    let all = outcomes.snapshot();
    let end = |id: &str| all.get(id).map(|o| (o.end, o.handled));
    println!("\n1. timeouts are retried with growing delays");
    let waits: Vec<u128> = runs
        .lock()
        .map(|r| r.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect())
        .unwrap_or_default();
    println!(
        "   handler runs of `timeout`: {:?}; gaps between the ends of its runs: {waits:?} ms",
        end("timeout")
    );
    c.check(
        end("timeout") == Some((End::Acked, 4)),
        "succeeded on attempt 4",
    );
    // Run k+1 starts after backoff k (200, 400, 800 ms) and, but for the
    // last, runs into the 500 ms handler timeout before it ends. A retry
    // rejoins the back of the work queue, so with a backlog (the flood) it
    // can come later than its backoff on a FIFO queue — never earlier.
    let fits = |gap: u128, delay: u128, run: u128| gap + 2 >= delay + run;
    c.check(
        waits.len() == 3
            && fits(waits[0], 200, 500)
            && fits(waits[1], 400, 500)
            && fits(waits[2], 800, 0),
        "no retry before its backoff of 200, 400, 800 ms (exponential, from the policy)",
    );
    println!("\n2. a JSON mapping error is parked at once");
    c.check(
        end("mapping") == Some((End::Parked, 1)),
        "parked on attempt 1, not retried",
    );
    println!("\n5. {POISON} poison messages do not starve {HEALTHY} healthy ones");
    let healthy_ok = all
        .iter()
        .filter(|(id, o)| id.starts_with("healthy-") && o.end == End::Acked)
        .count();
    let poison_parked = all
        .iter()
        .filter(|(id, o)| id.starts_with("poison-") && o.end == End::Parked && o.handled == 1)
        .count();
    c.check(ended, "every message reached an end");
    c.check(
        healthy_ok == HEALTHY,
        &format!("{healthy_ok}/{HEALTHY} healthy messages applied"),
    );
    c.check(
        poison_parked == POISON,
        &format!("{poison_parked}/{POISON} poison messages parked on attempt 1 ({:.1} s for the whole flood)", healthy_done.as_secs_f64()),
    );

    println!("\n4. the fix is deployed; the parked payment is replayed, then sent again");
    handler.deploy_fix();
    let lot = opened.transport.parking_lot();
    let filter = Filter::default()
        .reason("DESERIALIZATION_FAILED")
        .message_type("payment.capture");
    let who = ReplayRequest::new("drill", "handler v2 reads string amounts")?;
    let report = redrive(
        lot,
        &filter,
        &RedriveOptions::default().rate(50.0)?,
        &who,
        &config.limits,
    )
    .await?;
    println!("   redrive {report}");
    c.check(
        report.moved == 1 && report.is_clean(),
        "only the mapping error moved (the poison stays parked)",
    );
    c.check(
        wait_for(&outcomes, "mapping", End::Acked).await,
        "the replayed payment was applied",
    );
    p.publish(msg(
        "mapping-again",
        r#"{"payment":"d-2","amount":"12.50"}"#,
    ))
    .await?;
    c.check(
        wait_for(&outcomes, "mapping-again", End::Duplicate).await,
        "sent again, it is acknowledged as a duplicate, not applied twice",
    );
    c.check(
        handler.applied() == 2 + HEALTHY,
        &format!(
            "{} payments applied (d-1, d-2 and the healthy ones)",
            handler.applied()
        ),
    );

    let _ = stop.send(());
    let summary = running.await??;
    let parked = lot.browse(usize::MAX).await?.len();
    opened.producer.cleanup().await;
    println!(
        "\nworker: {} received, {} acked, {} duplicate, {} retried, {} parked; {parked} still parked (the poison)",
        summary.received, summary.acked, summary.duplicates, summary.retried, summary.parked
    );
    Ok(c.0)
}

fn msg(id: &str, body: &str) -> Message {
    Message::new("payments", body.to_owned())
        .with_id(id)
        .with_type("payment.capture")
}

/// Waits up to 30 s for a message to end as `want`.
async fn wait_for(outcomes: &Outcomes, id: &str, want: End) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if outcomes.snapshot().get(id).is_some_and(|o| o.end == want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Runs the worker on the config's own queue or topic until Ctrl-C.
async fn serve(config: Config) -> Result<bool, Box<dyn std::error::Error>> {
    if config.transport.kind == "memory" {
        return Err("--serve needs a broker: nothing outside this process can reach an in-memory queue (use examples/config/rabbitmq.toml, kafka.toml or sqs.toml)".into());
    }
    let transport = parkway::connect(&config).await?;
    println!("drill serving on {}:", transport.kind());
    for line in transport.describe() {
        println!("  {line}");
    }
    println!("publish JSON bodies (see examples/support/handler.rs); Ctrl-C stops\n");
    let worker = Worker::builder(transport, Payments::default())
        .config(&config)
        .observer(|step| {
            let what = match (&step.failure, &step.decision) {
                (None, _) => "ok → ack".to_owned(),
                (Some((class, reason)), Some(d)) => format!("{reason} ({class}) → {}", d.name()),
                (Some((class, reason)), None) => format!("{reason} ({class})"),
            };
            println!(
                "{} attempt {}: {what}",
                step.message_id.as_deref().unwrap_or("-"),
                step.attempt
            );
        })
        .build()?;
    let summary = worker
        .run(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    println!("\nstopped: {summary:?}");
    Ok(true)
}

#[tokio::main]
async fn main() -> ExitCode {
    let result = match args() {
        Err(e) => Err(e.into()),
        Ok(a) => match Config::load(&a.config) {
            Err(e) => Err(e.into()),
            Ok(config) if a.serve => serve(config).await,
            Ok(config) => drill(config).await,
        },
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("drill: some checks failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("drill: {e}");
            ExitCode::FAILURE
        }
    }
}
