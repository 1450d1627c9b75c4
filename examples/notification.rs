//! Seed 001's notification service on RabbitMQ: events go to an email queue
//! and a webhook queue; each queue has its own worker and retry policy;
//! failures are retried through DLX + TTL wait queues with growing delays,
//! and what cannot succeed is parked with its envelope.
//!
//! ```sh
//! scripts/rabbitmq-start
//! cargo run --example notification --features rabbitmq
//! ```
//!
//! The handlers are driven by the event body, e.g.
//! `{"event": "order.shipped", "email": {"fail": 2}, "webhook": {"gone": true}}`:
//! `fail: N` fails the first N attempts transiently (email: 429 rate limit,
//! webhook: timeout); `gone` / `invalid` fail for good.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "support/mod.rs"]
mod support;

use std::{process::ExitCode, sync::Arc, time::Duration};

use parkway::{
    Envelope, Failure, Handler, Message, RunSummary, Transport, Worker, WorkerError,
    config::Config,
    rabbitmq::{RabbitConfig, RabbitTransport},
    worker::Router,
};
use support::outcomes::Outcomes;
use tokio::task::JoinHandle;

/// One delivery service (email or webhook): reads its own section of the
/// event.
#[derive(Debug, Clone, Copy)]
struct Service(&'static str);

impl Handler for Service {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        let v: serde_json::Value = serde_json::from_slice(&msg.body)
            .map_err(|e| Failure::permanent("DESERIALIZATION_FAILED").with_source(e))?;
        let mine = &v[self.0];
        let before = u64::from(Envelope::decode(&msg.headers).attempts);
        let event = v["event"].as_str().unwrap_or("?");
        if before < mine["fail"].as_u64().unwrap_or(0) {
            return Err(match self.0 {
                "email" => Failure::new("EMAIL_RATE_LIMITED")
                    .with_source("smtp-relay: 429 Too Many Requests"),
                _ => Failure::new("WEBHOOK_TIMEOUT")
                    .with_source("POST https://hooks.example.invalid/events: timed out"),
            });
        }
        if mine["gone"].as_bool() == Some(true) {
            return Err(Failure::new("WEBHOOK_GONE").with_source("endpoint answered 410 Gone"));
        }
        if mine["invalid"].as_bool() == Some(true) {
            return Err(Failure::new("INVALID_ADDRESS").with_source("mailbox does not exist"));
        }
        println!("  {:<7} sent {event} (attempt {})", self.0, before + 1);
        Ok(())
    }
}

/// A queue of the service, on the shared work exchange.
async fn queue(
    base: &RabbitConfig,
    run: &str,
    service: &str,
    config: &Config,
) -> Result<RabbitTransport, Box<dyn std::error::Error>> {
    let mut c = base.clone();
    c.queue = format!("{}-{run}.{service}", base.queue);
    c.exchange = Some(format!("{}-{run}", base.queue));
    c.routing_key = Some(service.to_owned());
    let policies = config
        .router
        .policies()
        .filter(|p| p.name == service)
        .map(|p| &p.policy);
    RabbitTransport::connect(c, policies)
        .await
        .map_err(|e| format!("{e}\n  is RabbitMQ running? scripts/rabbitmq-start starts it").into())
}

/// A running worker and the switch that stops it.
type Running = (
    JoinHandle<Result<RunSummary, WorkerError>>,
    tokio::sync::oneshot::Sender<()>,
);

fn start(
    transport: &RabbitTransport,
    service: &'static str,
    config: &Config,
    outcomes: &Outcomes,
) -> Result<Running, Box<dyn std::error::Error>> {
    let policy = config
        .router
        .policies()
        .find(|p| p.name == service)
        .ok_or_else(|| format!("policies.{service} is missing from the config"))?
        .policy
        .clone();
    let seen = outcomes.clone();
    let worker = Worker::builder(Arc::new(transport.clone()), Service(service))
        .config(config)
        .router(Router::new(service, policy))
        .observer(move |step| seen.record(step))
        .build()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    Ok((task, stop))
}

async fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let config = Config::from_toml(include_str!("config/notification.toml"))?;
    let base = RabbitConfig::from_settings(&config.transport.settings)?;
    let run = format!("{:08x}", fastrand::u32(..));
    println!("notification service on RabbitMQ (run {run})\n");
    let email = queue(&base, &run, "email", &config).await?;
    let webhook = queue(&base, &run, "webhook", &config).await?;
    for t in [&email, &webhook] {
        for line in t.describe() {
            println!("  [{line}]");
        }
    }
    println!();
    let events = [
        ("signup-1", r#"{"event":"user.signup"}"#),
        (
            "shipped-2",
            r#"{"event":"order.shipped","email":{"fail":2},"webhook":{"fail":1}}"#,
        ),
        (
            "reset-3",
            r#"{"event":"password.reset","webhook":{"gone":true}}"#,
        ),
        (
            "invoice-4",
            r#"{"event":"invoice.issued","email":{"invalid":true}}"#,
        ),
    ];
    for (id, body) in events {
        // Dispatch: the event goes to every service's queue.
        for (t, service) in [(&email, "email"), (&webhook, "webhook")] {
            let m = Message::new("notifications", body).with_id(format!("{service}:{id}"));
            t.publish(&m).await?;
        }
    }
    let outcomes = Outcomes::default();
    let (email_task, stop_email) = start(&email, "email", &config, &outcomes)?;
    let (webhook_task, stop_webhook) = start(&webhook, "webhook", &config, &outcomes)?;
    let ended = outcomes
        .wait_ended(events.len() * 2, Duration::from_secs(60))
        .await;
    let _ = stop_email.send(());
    let _ = stop_webhook.send(());
    email_task.await??;
    webhook_task.await??;
    println!();
    outcomes.print();
    let mut parked = Vec::new();
    for t in [&email, &webhook] {
        for p in t.parking_lot().browse(100).await? {
            let e = &p.envelope;
            parked.push(format!(
                "{} in `{}`: {} ({}), attempt {}, last error: {}",
                p.message.id.as_deref().unwrap_or("-"),
                t.names().parking,
                e.reason
                    .as_ref()
                    .map_or("-".to_owned(), ToString::to_string),
                e.class.map_or("-".to_owned(), |c| c.to_string()),
                e.attempts,
                e.last_error.as_deref().unwrap_or("-"),
            ));
        }
    }
    println!("\n  parked:");
    for line in &parked {
        println!("    {line}");
    }
    for t in [&email, &webhook] {
        let _ = t.delete_topology().await;
        t.close().await;
    }
    let snapshot = outcomes.snapshot();
    let retried = |id: &str| snapshot.get(id).map_or(0, |o| o.retried);
    let ok = ended
        && parked.len() == 2
        && retried("email:shipped-2") == 2
        && retried("webhook:shipped-2") == 1;
    println!(
        "\n  [{}] rate-limited email retried twice, slow webhook once; the gone webhook and the invalid address parked",
        if ok { "PASS" } else { "FAIL" }
    );
    Ok(ok)
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("notification: {e}");
            ExitCode::FAILURE
        }
    }
}
