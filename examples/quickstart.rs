//! Parkway in one screen, on the in-memory transport (no broker needed):
//!
//! - order 1001 times out three times, then succeeds (growing delays);
//! - order 1002 is malformed JSON: parked at once, attempt 1;
//! - order 1003 is rejected by the business: parked at once;
//! - order 1004 hits a dependency that stays down: parked when the budget
//!   is spent, with its attempt count and first-failure time;
//! - then the dependency is "fixed" and a filtered redrive moves back only
//!   order 1004.
//!
//! Run: `cargo run --example quickstart`
#![allow(clippy::print_stdout)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use parkway::{
    Decision, EnvelopeLimits, Failure, Handler, Message, ParkingLot, Step, Transport, Worker,
    config::Config,
    memory::MemoryTransport,
    redrive::{Filter, RedriveOptions, ReplayRequest, redrive},
};

/// The order service's handler. What it does is driven by the message, so
/// any producer can exercise every path.
struct Orders {
    downstream_up: Arc<AtomicBool>,
}

impl Handler for Orders {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        let order: serde_json::Value = serde_json::from_slice(&msg.body)
            .map_err(|e| Failure::new("DESERIALIZATION_FAILED").with_source(e))?;
        let attempts_before = parkway::Envelope::decode(&msg.headers).attempts;
        match order["simulate"].as_str() {
            Some("slow-3") if attempts_before < 3 => {
                // Longer than the 250 ms handler timeout.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Some("reject") => {
                return Err(Failure::new("ILLEGAL_BUSINESS_TRANSITION")
                    .with_source(format!("order {} is already shipped", order["order"])));
            }
            Some("downstream") if !self.downstream_up.load(Ordering::SeqCst) => {
                return Err(Failure::new("DOWNSTREAM_UNAVAILABLE")
                    .with_source("inventory-service: 503 Service Unavailable"));
            }
            _ => {}
        }
        Ok(())
    }
}

fn describe(step: &Step, t0: Instant) {
    let id = step.message_id.as_deref().unwrap_or("-");
    let at = t0.elapsed().as_secs_f64();
    let what = match (&step.failure, &step.decision) {
        (None, _) => "succeeded → ack".to_owned(),
        (Some((class, reason)), Some(d)) => {
            let next = match d {
                Decision::RetryLater(delay) | Decision::RetryLocal(delay) => {
                    format!("retry in {}", humantime_ms(*delay))
                }
                Decision::Park(_) => "PARK".to_owned(),
                Decision::Discard(_) => "discard".to_owned(),
                other => other.name().to_owned(),
            };
            format!("{reason} ({class}) → {next}")
        }
        (Some((class, reason)), None) => format!("{reason} ({class})"),
    };
    println!("  [{at:5.2}s] {id:<10} attempt {}: {what}", step.attempt);
}

fn humantime_ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

async fn print_lot(lot: &dyn ParkingLot) -> Result<(), Box<dyn std::error::Error>> {
    let parked = lot.browse(100).await?;
    println!("  parking lot: {} message(s)", parked.len());
    for p in parked {
        let e = &p.envelope;
        println!(
            "    {:<10} reason {:<28} class {:<20} attempts {}  first failure {}",
            e.message_id.as_deref().unwrap_or("-"),
            e.reason.as_ref().map_or("-".into(), ToString::to_string),
            e.class.map_or("-".into(), |c| c.to_string()),
            e.attempts,
            e.first_failure_at
                .map_or("-".into(), |t| humantime::format_rfc3339_millis(t)
                    .to_string()),
        );
    }
    Ok(())
}

async fn run_worker(
    config: &Config,
    transport: &MemoryTransport,
    downstream_up: &Arc<AtomicBool>,
    t0: Instant,
) -> Result<parkway::RunSummary, Box<dyn std::error::Error>> {
    let worker = Worker::builder(
        Arc::new(transport.clone()),
        Orders {
            downstream_up: downstream_up.clone(),
        },
    )
    .config(config)
    .observer(move |step| describe(step, t0))
    .build()?;
    let idle = transport.clone();
    Ok(worker.run(async move { idle.idle().await }).await?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::from_toml(include_str!("parkway.toml"))?;
    let transport = MemoryTransport::new("orders");
    let downstream_up = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();

    println!("Parkway quickstart — in-memory transport, policy `create-order`\n");
    let orders = [
        ("order-1001", r#"{"order":1001,"simulate":"slow-3"}"#),
        ("order-1002", r#"{"order":1002, "items": [oops"#),
        ("order-1003", r#"{"order":1003,"simulate":"reject"}"#),
        ("order-1004", r#"{"order":1004,"simulate":"downstream"}"#),
        ("order-1005", r#"{"order":1005}"#),
    ];
    for (id, body) in orders {
        transport.publish(
            Message::new("orders.create", body)
                .with_id(id)
                .with_type("CreateOrder"),
        );
    }
    println!("1. Five orders published; the worker runs until the queue is idle:");
    let first = run_worker(&config, &transport, &downstream_up, t0).await?;
    println!();
    print_lot(transport.parking_lot()).await?;

    println!("\n2. The inventory service is fixed. Redrive only DOWNSTREAM_UNAVAILABLE:");
    downstream_up.store(true, Ordering::SeqCst);
    let filter = Filter::default().reason("DOWNSTREAM_UNAVAILABLE");
    let dry = redrive(
        transport.parking_lot(),
        &filter,
        &RedriveOptions::default().dry_run(true),
        &ReplayRequest::new("quickstart", "inventory-service fixed")?,
        &EnvelopeLimits::default(),
    )
    .await?;
    println!("  dry run:  {dry}");
    let report = redrive(
        transport.parking_lot(),
        &filter,
        &RedriveOptions::default().rate(50.0)?,
        &ReplayRequest::new("quickstart", "inventory-service fixed")?,
        &config.limits,
    )
    .await?;
    println!("  redrive:  {report}");
    let second = run_worker(&config, &transport, &downstream_up, t0).await?;
    println!();
    print_lot(transport.parking_lot()).await?;

    let stats = transport.stats();
    println!(
        "\nSummary: {} published, {} deliveries, {} acked, {} retried, {} parked, {} redriven; \
         {} still parked (malformed JSON and business rejection wait for a human).",
        stats.published,
        stats.delivered,
        first.acked + second.acked,
        stats.retried,
        stats.parked,
        stats.redriven,
        transport.parked_len(),
    );
    Ok(())
}
