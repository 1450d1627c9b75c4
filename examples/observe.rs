//! Observability wiring: the worker's metrics served in Prometheus format
//! on 127.0.0.1, and its logs through `tracing-subscriber`, human-readable
//! or JSON. The library only emits (through the `metrics` and `tracing`
//! facades); installing a recorder and a subscriber is the application's
//! job, as here.
//!
//! ```sh
//! cargo run --example observe                      # human logs, metrics on 127.0.0.1:9464
//! cargo run --example observe -- --log json --listen 127.0.0.1:9500 --seconds 30
//! curl -s http://127.0.0.1:9464/metrics | grep parkway_
//! ```
//!
//! It runs the payments handler of the other examples on the config's
//! transport (default `examples/config/memory.toml`) and feeds it a mix of
//! healthy, flaky, rejected and malformed payments for `--seconds` (default
//! 60), then stops.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "support/mod.rs"]
mod support;

use std::{net::SocketAddr, process::ExitCode, time::Duration};

use metrics_exporter_prometheus::PrometheusBuilder;
use parkway::{Message, Worker, config::Config};
use support::{broker, handler::Payments};
use tracing_subscriber::{filter::LevelFilter, fmt};

struct Args {
    config: String,
    listen: SocketAddr,
    json: bool,
    seconds: u64,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        config: "examples/config/memory.toml".to_owned(),
        listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
        json: false,
        seconds: 60,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--config" => a.config = value()?,
            "--listen" => {
                a.listen = value()?
                    .parse()
                    .map_err(|e| format!("--listen: {e} (e.g. 127.0.0.1:9464)"))?;
            }
            "--log" => {
                a.json = match value()?.as_str() {
                    "json" => true,
                    "human" => false,
                    other => return Err(format!("--log {other:?}: human or json")),
                };
            }
            "--seconds" => {
                a.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if !a.listen.ip().is_loopback() {
        return Err(format!(
            "--listen {}: this example serves on loopback only",
            a.listen
        ));
    }
    Ok(a)
}

fn install_logs(json: bool) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let builder = fmt()
        .with_max_level(LevelFilter::INFO)
        .with_writer(std::io::stderr);
    if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    }
}

async fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    install_logs(a.json).map_err(|e| format!("logging: {e}"))?;
    PrometheusBuilder::new()
        .with_http_listener(a.listen)
        .install()
        .map_err(|e| format!("metrics on {}: {e}", a.listen))?;
    eprintln!("metrics: curl -s http://{}/metrics", a.listen);
    let mut config = Config::load(&a.config)?;
    broker::per_run(&mut config);
    let opened = broker::open(&config, 1).await?;
    let worker = Worker::builder(opened.transport.clone(), Payments::default())
        .config(&config)
        .build()?;
    let producer = opened.producer.clone();
    let feed = tokio::spawn(async move {
        let bodies = [
            r#"{"amount":10}"#,
            r#"{"amount":20,"fail_transient":2}"#,
            r#"{"reject":"card blocked"}"#,
            r#"{"amount":"#,
            r#"{"amount":30}"#,
        ];
        for i in 0u64.. {
            let body = bodies[usize::try_from(i).unwrap_or(0) % bodies.len()];
            let body = body.replacen('{', &format!(r#"{{"payment":"obs-{i}","#), 1);
            if producer
                .publish(Message::new("payments", body).with_id(format!("obs-{i}")))
                .await
                .is_err()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let seconds = a.seconds;
    let summary = worker
        .run(async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(seconds)) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        })
        .await?;
    feed.abort();
    opened.producer.cleanup().await;
    eprintln!("stopped: {summary:?}");
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let result = match args() {
        Ok(a) => run(a).await,
        Err(e) => Err(e.into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("observe: {e}");
            ExitCode::FAILURE
        }
    }
}
