//! Seed 002's ledger on Kafka in pause-partition mode: account 42 gets
//! TXN-100 (balance 1000), TXN-101 (withdraw 500, failing twice with a
//! database timeout) and TXN-102 (withdraw 700). They apply in offset order
//! despite the failures: TXN-101 is retried in place while TXN-102 waits
//! behind it, so TXN-102 is rejected (700 > 500 left) — the outcome the
//! ledger's true order gives. A retry-topic mode would have let TXN-102
//! overtake (see `tests/kafka/ledger.rs`).
//!
//! ```sh
//! scripts/kafka-start
//! cargo run --example ledger --features kafka
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "support/mod.rs"]
mod support;

use std::{
    collections::HashMap,
    process::ExitCode,
    sync::{Arc, Mutex},
    time::Duration,
};

use parkway::{Failure, Handler, Message, Worker, config::Config};
use support::{broker, outcomes::Outcomes};

/// The account: balance, what was applied or rejected, tries per txn.
#[derive(Debug, Clone, Default)]
struct Ledger {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    balance: i64,
    applied: Vec<String>,
    rejected: Vec<String>,
    tries: HashMap<String, u32>,
}

impl Handler for Ledger {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        // {"txn": "TXN-101", "op": "withdraw", "amount": 500, "fail": 2}
        let v: serde_json::Value = serde_json::from_slice(&msg.body)
            .map_err(|e| Failure::permanent("DESERIALIZATION_FAILED").with_source(e))?;
        let (Some(txn), Some(op), Some(amount)) =
            (v["txn"].as_str(), v["op"].as_str(), v["amount"].as_i64())
        else {
            return Err(Failure::permanent("INVALID_TRANSACTION")
                .with_source("txn, op and amount are required"));
        };
        let mut s = self
            .state
            .lock()
            .map_err(|_| Failure::transient("LEDGER_LOCK_POISONED"))?;
        let tries = {
            let t = s.tries.entry(txn.to_owned()).or_default();
            *t += 1;
            *t
        };
        if u64::from(tries) <= v["fail"].as_u64().unwrap_or(0) {
            println!("  {txn}: try {tries}: ledger database timed out → retried in place");
            return Err(
                Failure::transient("LEDGER_DB_TIMEOUT").with_source("ledger-db: statement timeout")
            );
        }
        match op {
            "deposit" => s.balance += amount,
            "withdraw" if s.balance >= amount => s.balance -= amount,
            "withdraw" => {
                println!(
                    "  {txn}: withdraw {amount} > balance {} → REJECTED",
                    s.balance
                );
                s.rejected.push(txn.to_owned());
                return Err(Failure::business("INSUFFICIENT_FUNDS")
                    .with_source(format!("balance {} < {amount}", s.balance)));
            }
            other => {
                return Err(Failure::permanent("INVALID_TRANSACTION")
                    .with_source(format!("unknown op {other:?}")));
            }
        }
        println!("  {txn}: {op} {amount} → balance {}", s.balance);
        s.applied.push(txn.to_owned());
        Ok(())
    }
}

async fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let mut config = Config::from_toml(include_str!("config/ledger.toml"))?;
    let run = broker::per_run(&mut config);
    println!("ledger on Kafka, pause-partition mode (run {run})\n");
    let opened = broker::open(&config, 3).await?;
    for (txn, body) in [
        (
            "TXN-100",
            r#"{"txn":"TXN-100","op":"deposit","amount":1000}"#,
        ),
        (
            "TXN-101",
            r#"{"txn":"TXN-101","op":"withdraw","amount":500,"fail":2}"#,
        ),
        (
            "TXN-102",
            r#"{"txn":"TXN-102","op":"withdraw","amount":700}"#,
        ),
    ] {
        // One key: one partition, so the offsets are the ledger's order.
        let m = Message::new("ledger", body)
            .with_id(txn)
            .with_key("account-42");
        opened.producer.publish(m).await?;
    }
    let ledger = Ledger::default();
    let outcomes = Outcomes::default();
    let seen = outcomes.clone();
    let worker = Worker::builder(opened.transport.clone(), ledger.clone())
        .config(&config)
        .observer(move |step| seen.record(step))
        .build()?;
    for line in opened.transport.describe() {
        println!("  [{line}]");
    }
    println!();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    let ended = outcomes.wait_ended(3, Duration::from_secs(60)).await;
    let _ = stop.send(());
    running.await??;
    opened.producer.cleanup().await;
    let s = ledger.state.lock().map_err(|_| "ledger state poisoned")?;
    println!(
        "\n  applied {:?}, rejected {:?}, balance {}",
        s.applied, s.rejected, s.balance
    );
    let ok = ended
        && s.applied == ["TXN-100", "TXN-101"]
        && s.rejected == ["TXN-102"]
        && s.balance == 500;
    println!(
        "  [{}] applied in offset order despite TXN-101's failures; TXN-102 rejected (700 > 500)",
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
            eprintln!("ledger: {e}");
            ExitCode::FAILURE
        }
    }
}
