//! The `parkway` binary, run as an operator runs it: exit codes, messages
//! that name the field, and — against the real brokers (start them with
//! `scripts/rabbitmq-start`, `scripts/kafka-start` and `scripts/sqs-start`)
//! — list, show, dry-run and redrive of parked messages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests abort on setup failure

use std::{
    path::PathBuf,
    process::{Command, Output},
    time::{Duration, SystemTime},
};

use parkway::{Envelope, EnvelopeLimits, FailureClass, Headers, Settle, Transport};

#[cfg(feature = "kafka")]
#[path = "cli/kafka.rs"]
mod kafka;
#[cfg(feature = "rabbitmq")]
#[path = "cli/rabbitmq.rs"]
mod rabbitmq;
#[cfg(feature = "sqs")]
#[path = "cli/sqs.rs"]
mod sqs;

/// Runs the binary.
pub(crate) fn parkway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_parkway"))
        .args(args)
        .output()
        .expect("the parkway binary runs")
}

#[cfg_attr(
    not(any(feature = "rabbitmq", feature = "kafka", feature = "sqs")),
    allow(dead_code)
)]
/// Runs the binary off the async runtime (broker tests are async).
pub(crate) async fn run(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        parkway(&args)
    })
    .await
    .unwrap()
}

#[cfg_attr(
    not(any(feature = "rabbitmq", feature = "kafka", feature = "sqs")),
    allow(dead_code)
)]
/// Owned command-line arguments.
pub(crate) fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts the exit code, showing both streams if it differs.
#[track_caller]
pub(crate) fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "exit code\n--- stdout\n{}\n--- stderr\n{}",
        stdout(o),
        stderr(o)
    );
}

/// A config file in the temp dir with `transport` and one policy.
pub(crate) struct ConfigFile(PathBuf);

impl ConfigFile {
    pub(crate) fn new(transport: &str, policy: &str) -> Self {
        let path = std::env::temp_dir().join(format!("parkway-cli-{:08x}.toml", fastrand::u32(..)));
        let text = format!("[transport]\n{transport}\n\n[policies.payments]\n{policy}\n");
        std::fs::write(&path, text).unwrap();
        ConfigFile(path)
    }

    pub(crate) fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A policy every broker can hold.
pub(crate) const POLICY: &str =
    "max_attempts = 3\nbackoff = { kind = \"fixed\", delay = \"200ms\" }\n";

#[cfg_attr(
    not(any(feature = "rabbitmq", feature = "kafka", feature = "sqs")),
    allow(dead_code)
)]
/// Receives `reasons.len()` deliveries from `t` and parks each with an
/// envelope for its reason (`DOWNSTREAM_*` transient, others permanent).
pub(crate) async fn park_all(t: &dyn Transport, reasons: &[&str]) {
    for reason in reasons {
        let d = tokio::time::timeout(Duration::from_secs(30), t.receive())
            .await
            .expect("a delivery within 30 s")
            .expect("receive")
            .expect("the transport is open");
        let class = if reason.starts_with("DOWNSTREAM") {
            FailureClass::Transient
        } else {
            FailureClass::PermanentTechnical
        };
        let now = SystemTime::now();
        let env = Envelope {
            attempts: 3,
            reason: Some(parkway::Reason::parse(reason).unwrap()),
            class: Some(class),
            first_failure_at: Some(now - Duration::from_secs(90)),
            last_failure_at: Some(now),
            message_id: d.message.id.clone(),
            origin: d.origin.clone(),
            last_error: Some(format!("{reason}: scripted")),
            ..Envelope::default()
        };
        let mut headers: Headers = d.message.headers.clone();
        env.encode(&mut headers, &EnvelopeLimits::default());
        t.settle(d, Settle::Park { headers }).await.expect("park");
    }
}

#[cfg_attr(
    not(any(feature = "rabbitmq", feature = "kafka", feature = "sqs")),
    allow(dead_code)
)]
/// The parsed JSON of a command's stdout.
pub(crate) fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stdout(o)))
}

#[test]
fn help_reads_well_and_lists_the_exit_codes() {
    let o = parkway(&["--help"]);
    assert_exit(&o, 0);
    let out = stdout(&o);
    for word in ["check", "topology", "parked", "Exit codes", "canary"] {
        assert!(out.contains(word), "--help lacks {word:?}:\n{out}");
    }
    let o = parkway(&["parked", "redrive", "--help"]);
    assert_exit(&o, 0);
    for flag in [
        "--dry-run",
        "--limit",
        "--rate",
        "--canary",
        "--operator",
        "--replay-reason",
        "--reason",
        "--header",
    ] {
        assert!(stdout(&o).contains(flag), "redrive --help lacks {flag}");
    }
}

#[test]
fn check_prints_the_plan_of_a_good_config() {
    let c = ConfigFile::new("kind = \"memory\"\nqueue = \"orders\"", POLICY);
    let o = parkway(&["check", "--config", c.path()]);
    assert_exit(&o, 0);
    let out = stdout(&o);
    assert!(out.contains("valid"), "{out}");
    assert!(out.contains("policy `payments`"), "{out}");
    assert!(out.contains("200ms, 200ms"), "delays per retry: {out}");
    assert!(out.contains("exact to 1ms"), "precision: {out}");
    let o = parkway(&["check", "--config", "examples/parkway.toml"]);
    assert_exit(&o, 0);
    assert!(stdout(&o).contains("policy `sync-crm`"));
}

#[test]
fn check_names_the_bad_field_and_exits_1() {
    let c = ConfigFile::new("kind = \"memory\"", "max_attempts = 0");
    let o = parkway(&["check", "--config", c.path()]);
    assert_exit(&o, 1);
    assert!(
        stderr(&o).contains("policies.payments.max_attempts"),
        "{}",
        stderr(&o)
    );
    let c = ConfigFile::new("kind = \"memory\"\nqeueu = \"x\"", POLICY);
    let o = parkway(&["check", "--config", c.path()]);
    assert_exit(&o, 1);
    assert!(stderr(&o).contains("transport.qeueu"), "{}", stderr(&o));
    let c = ConfigFile::new("kind = \"carrier-pigeon\"", POLICY);
    let o = parkway(&["check", "--config", c.path()]);
    assert_exit(&o, 1);
    assert!(stderr(&o).contains("carrier-pigeon"), "{}", stderr(&o));
    let o = parkway(&["check", "--config", "/nonexistent/parkway.toml"]);
    assert_exit(&o, 1);
    assert!(
        stderr(&o).contains("/nonexistent/parkway.toml"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn usage_errors_exit_1_and_name_the_flag() {
    let o = parkway(&[
        "parked",
        "redrive",
        "--config",
        "x.toml",
        "--replay-reason",
        "r",
    ]);
    assert_exit(&o, 1);
    assert!(stderr(&o).contains("--operator"), "{}", stderr(&o));
    let c = ConfigFile::new("kind = \"memory\"", POLICY);
    let o = parkway(&["parked", "list", "--config", c.path(), "--class", "fatal"]);
    assert_exit(&o, 1);
    assert!(stderr(&o).contains("--class"), "{}", stderr(&o));
    let o = parkway(&[
        "parked",
        "redrive",
        "--config",
        c.path(),
        "--operator",
        "a",
        "--replay-reason",
        "r",
        "--rate",
        "0",
    ]);
    assert_exit(&o, 1);
    assert!(stderr(&o).contains("--rate"), "{}", stderr(&o));
}

#[test]
fn the_memory_lot_is_not_faked_from_another_process() {
    let c = ConfigFile::new("kind = \"memory\"", POLICY);
    for cmd in [
        vec!["parked", "list", "--config", c.path()],
        vec![
            "parked",
            "redrive",
            "--config",
            c.path(),
            "--operator",
            "a",
            "--replay-reason",
            "r",
        ],
    ] {
        let o = parkway(&cmd);
        assert_exit(&o, 1);
        assert!(
            stderr(&o).contains("inside the worker's process"),
            "{}",
            stderr(&o)
        );
    }
    let o = parkway(&["topology", "apply", "--config", c.path()]);
    assert_exit(&o, 0);
    assert!(stdout(&o).contains("nothing to declare"));
}

#[cfg(not(feature = "rabbitmq"))]
#[test]
fn a_transport_not_compiled_in_names_its_feature() {
    let c = ConfigFile::new(
        "kind = \"rabbitmq\"\nurl = \"amqp://h\"\nqueue = \"q\"",
        POLICY,
    );
    let o = parkway(&["check", "--config", c.path()]);
    assert_exit(&o, 1);
    assert!(stderr(&o).contains("`rabbitmq` feature"), "{}", stderr(&o));
}

#[cfg(feature = "kafka")]
#[test]
fn check_refuses_an_impossible_plan_naming_the_policy() {
    let c = ConfigFile::new(
        "kind = \"kafka\"\nbootstrap_servers = \"127.0.0.1:9092\"\ngroup_id = \"g\"\ntopic = \"t\"",
        "max_attempts = 3\nbackoff = { kind = \"fixed\", delay = \"2d\" }\n",
    );
    let o = parkway(&["check", "--config", c.path()]);
    assert_exit(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("impossible plan") && err.contains("`payments`") && err.contains("2days"),
        "{err}"
    );
}

#[cfg(feature = "sqs")]
#[test]
fn check_prints_the_sqs_plan_and_refuses_what_sqs_cannot_hold() {
    let sqs = "kind = \"sqs\"\nqueue = \"orders\"\nregion = \"eu-west-1\"";
    let c = ConfigFile::new(sqs, POLICY);
    let o = parkway(&["check", "--config", c.path()]);
    assert_exit(&o, 0);
    let out = stdout(&o);
    for want in [
        "queue `orders-dlq` (standard)",
        "maxReceiveCount 8 (largest max_attempts 3 + receive_margin 5)",
        "retry: visibility",
        "native redrive yes",
    ] {
        assert!(out.contains(want), "lacks {want:?}:\n{out}");
    }
    // `resend` holds 15 minutes at most: a 1-hour delay is refused offline.
    let c = ConfigFile::new(
        &format!("{sqs}\nretry_mode = \"resend\""),
        "max_attempts = 3\nbackoff = { kind = \"fixed\", delay = \"1h\" }\n",
    );
    let o = parkway(&["check", "--config", c.path()]);
    assert_exit(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("impossible plan") && err.contains("`payments`"),
        "{err}"
    );
    // An ordered policy needs a FIFO queue.
    let c = ConfigFile::new(sqs, "ordering = \"ordered\"\n");
    let o = parkway(&["check", "--config", c.path()]);
    assert_exit(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("transport.queue") && err.contains("`orders.fifo`"),
        "{err}"
    );
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    // `parkway check … | head -1`: the reader goes away before the output.
    let mut child = Command::new(env!("CARGO_BIN_EXE_parkway"))
        .args(["check", "--config", "examples/parkway.toml"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert_exit(&o, 0);
}
