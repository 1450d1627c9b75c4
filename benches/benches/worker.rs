//! In-memory worker throughput against a bare loop over the same channel.
//!
//! Publishes N messages (env `PARKWAY_BENCH_N`, default 200 000) to a
//! `MemoryTransport`, runs a `Worker` with a handler that returns `Ok(())`
//! (concurrency 64, default policy) until the transport is idle, and prints
//! messages per second. The baseline is a bare `receive` + `settle(Ack)` loop
//! over a fresh `MemoryTransport` with the same N. Both run on a
//! multi-thread and on a current-thread tokio runtime; each figure is the
//! median of `PARKWAY_BENCH_ROUNDS` rounds (default 5).
//!
//! No tracing subscriber or metrics recorder is installed: the engine's
//! spans, events and metrics are the no-ops a library user gets by default.
//!
//! Run: `cargo bench -p parkway-benches --bench worker`
// A bench may abort on a setup failure, and its output is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::{sync::Arc, time::Instant};

use parkway_benches::{env_or, median};
use parkway_core::{Failure, Handler, Message, Settle, Transport, Worker, memory::MemoryTransport};
use tokio::runtime::{Builder, Runtime};

/// Concurrency of the engine's worker.
const CONCURRENCY: usize = 64;

/// Acknowledges everything at once.
struct Noop;

impl Handler for Noop {
    async fn handle(&self, _message: &Message) -> Result<(), Failure> {
        Ok(())
    }
}

fn filled(n: u64) -> MemoryTransport {
    let t = MemoryTransport::new("bench");
    for _ in 0..n {
        t.publish(Message::new("bench", "{}"));
    }
    t
}

/// Messages per second through the worker.
async fn engine(n: u64) -> f64 {
    let transport = filled(n);
    let worker = Worker::builder(Arc::new(transport.clone()), Noop)
        .concurrency(CONCURRENCY)
        .build()
        .expect("worker builds");
    let start = Instant::now();
    let summary = worker
        .run(transport.idle())
        .await
        .expect("worker runs to idle");
    let elapsed = start.elapsed();
    assert_eq!(summary.acked, n, "engine acked {summary:?}");
    assert_eq!(transport.stats().acked, n);
    n as f64 / elapsed.as_secs_f64()
}

/// Messages per second through a bare receive + ack loop.
async fn bare(n: u64) -> f64 {
    let transport = filled(n);
    let start = Instant::now();
    for _ in 0..n {
        let d = transport
            .receive()
            .await
            .expect("receive")
            .expect("a message");
        transport.settle(d, Settle::Ack).await.expect("ack");
    }
    let elapsed = start.elapsed();
    assert_eq!(transport.stats().acked, n);
    n as f64 / elapsed.as_secs_f64()
}

fn compare(label: &str, rt: &Runtime, n: u64, rounds: u64) {
    let mut engine_rates = Vec::new();
    let mut bare_rates = Vec::new();
    for round in 1..=rounds {
        let e = rt.block_on(engine(n));
        let b = rt.block_on(bare(n));
        println!(
            "  {label} round {round}: engine {e:>12.0} msgs/s   bare {b:>12.0} msgs/s   ratio {:.3}",
            e / b
        );
        engine_rates.push(e);
        bare_rates.push(b);
    }
    let (e, b) = (median(&engine_rates), median(&bare_rates));
    println!("{label}: worker/engine (concurrency {CONCURRENCY}): {e:.0} msgs/s (median)");
    println!("{label}: bare receive+ack loop:          {b:.0} msgs/s (median)");
    println!("{label}: ratio engine/bare:              {:.3}", e / b);
    println!();
}

fn main() {
    let n = env_or("PARKWAY_BENCH_N", 200_000).max(1);
    let rounds = env_or("PARKWAY_BENCH_ROUNDS", 5).max(1);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!(
        "worker throughput, in-memory transport: N = {n} messages, {rounds} rounds, {cores} cores"
    );
    println!();

    let multi = Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("multi-thread runtime");
    compare("multi_thread", &multi, n, rounds);
    drop(multi);

    let current = Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("current-thread runtime");
    compare("current_thread", &current, n, rounds);
}
