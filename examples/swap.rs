//! One handler, any broker: the same handler and the same `[policies]` run
//! on whichever transport the config's `[transport]` table names, and give
//! the same outcomes.
//!
//! ```sh
//! cargo run --example swap -- --config examples/config/memory.toml
//! cargo run --example swap --features rabbitmq -- --config examples/config/rabbitmq.toml
//! cargo run --example swap --features kafka -- --config examples/config/kafka.toml
//! cargo run --example swap --features sqs -- --config examples/config/sqs.toml
//! ```
//!
//! The files in `examples/config/` differ only in `[transport]`. A broker
//! this build lacks fails with an error naming the cargo feature. Each run
//! uses its own queue / topic names (a random suffix), so reruns never see
//! an earlier run's messages; RabbitMQ and SQS queues are deleted at the end.
//!
//! With `--keep` the run uses the config's names as they are and leaves the
//! queues or topics in place, so that `parkway parked list --config <same
//! file>` finds its four parked messages.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "support/mod.rs"]
mod support;

use std::{process::ExitCode, time::Duration};

use parkway::{Message, Worker, config::Config};
use support::{broker, handler::Payments, outcomes::Outcomes};

/// The messages every transport gets, and what they exercise.
const MESSAGES: &[(&str, &str)] = &[
    ("ok", r#"{"payment":"p-1","amount":10}"#),
    (
        "flaky",
        r#"{"payment":"p-2","amount":20,"fail_transient":2}"#,
    ),
    ("malformed", r#"{"payment":"p-3","amount":"#),
    ("mapping", r#"{"payment":"p-4","amount":"12.50"}"#),
    (
        "rejected",
        r#"{"payment":"p-5","reject":"card blocked by issuer"}"#,
    ),
    (
        "down",
        r#"{"payment":"p-6","amount":60,"fail_forever":true}"#,
    ),
    ("again", r#"{"payment":"p-1","amount":10}"#),
];

struct Args {
    config: String,
    keep: bool,
}

fn args() -> Result<Args, String> {
    let mut config = None;
    let mut keep = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" => config = it.next(),
            "--keep" => keep = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let usage = "usage: swap --config examples/config/<memory|rabbitmq|kafka|sqs>.toml [--keep]";
    Ok(Args {
        config: config.ok_or(usage)?,
        keep,
    })
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let Args { config: path, keep } = args()?;
    let mut config = Config::load(&path)?;
    let run = if keep {
        "kept: the config's own names".to_owned()
    } else {
        broker::per_run(&mut config)
    };
    println!(
        "swap: transport {} from {path} (run {run})",
        config.transport.kind
    );
    let opened = broker::open(&config, 1).await?;
    // "again" repeats p-1: it must come after "ok" to be the duplicate.
    for (id, body) in MESSAGES {
        opened
            .producer
            .publish(Message::new("payments", *body).with_id(*id))
            .await?;
    }
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    let worker = Worker::builder(opened.transport.clone(), Payments::default())
        .config(&config)
        .concurrency(1) // one at a time, so "ok" is applied before "again"
        .observer(move |step| seen.record(step))
        .build()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    let all_ended = outcomes
        .wait_ended(MESSAGES.len(), Duration::from_secs(60))
        .await;
    let _ = stop.send(());
    let summary = running.await??;
    let parked = opened.transport.parking_lot().browse(100).await?.len();
    if keep {
        opened.producer.close().await;
    } else {
        opened.producer.cleanup().await;
    }
    println!();
    outcomes.print();
    println!(
        "\n  totals: {} acked, {} duplicate, {} retried, {} parked ({} in the parking lot)",
        summary.acked, summary.duplicates, summary.retried, summary.parked, parked
    );
    if !all_ended {
        return Err("not every message reached an end within 60 s".into());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("swap: {e}");
            ExitCode::FAILURE
        }
    }
}
