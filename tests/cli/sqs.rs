//! The CLI against a real SQS emulator (`scripts/sqs-start`;
//! `PARKWAY_SQS_ENDPOINT` overrides the address), each test on its own
//! randomly named queues.

use std::time::Duration;

use parkway::{Envelope, RetryPolicy, Transport, config::Config};
use parkway_sqs::{SqsConfig, SqsTransport, TopologyMode};

use crate::{ConfigFile, POLICY, args, assert_exit, json, park_all, run, stderr, stdout};

fn endpoint() -> String {
    std::env::var("PARKWAY_SQS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:4566".into())
}

/// A config file on a fresh queue name of the emulator.
fn config_file() -> (String, ConfigFile) {
    let queue = format!("pw-cli-{:08x}", fastrand::u32(..));
    let file = ConfigFile::new(
        &format!(
            "kind = \"sqs\"\nqueue = \"{queue}\"\nregion = \"us-east-1\"\nendpoint = \"{}\"\ncredentials = \"emulator\"\nwait_time = \"1s\"\ncall_timeout = \"10s\"\nvisibility_timeout = \"10s\"",
            endpoint()
        ),
        POLICY,
    );
    (queue, file)
}

/// The file's settings and policy, as the CLI reads them.
fn settings(file: &ConfigFile) -> (Config, SqsConfig, RetryPolicy) {
    let config = Config::load(file.path()).unwrap();
    let settings = SqsConfig::from_settings(&config.transport.settings).unwrap();
    let policy = config.router.policies().next().unwrap().policy.clone();
    (config, settings, policy)
}

fn unreachable(e: impl std::fmt::Display) -> String {
    format!(
        "cannot reach the SQS emulator at {}: {e}\n  run scripts/sqs-start first",
        endpoint()
    )
}

/// Runs the binary off the async runtime (it starts its own).
async fn lot_ids(t: &SqsTransport) -> Vec<String> {
    let mut ids: Vec<String> = t
        .parking_lot()
        .browse(1000)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|p| p.message.id)
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_dry_run_and_redrive_on_the_dead_letter_queue() {
    let (queue, c) = config_file();
    let (config, settings, policy) = settings(&c);
    let t = SqsTransport::connect(settings, [&policy])
        .await
        .unwrap_or_else(|e| panic!("{}", unreachable(e)));
    // The offline plan (`parkway check`) states what the transport states.
    assert_eq!(
        parkway::plan(&config).unwrap().capabilities,
        t.capabilities()
    );
    let reasons = [
        "DOWNSTREAM_TIMEOUT",
        "SCHEMA_V1",
        "DOWNSTREAM_TIMEOUT",
        "DOWNSTREAM_TIMEOUT",
    ];
    for i in 0..reasons.len() {
        let m = parkway::Message::new("cli", format!("{{\"n\":{i}}}"))
            .with_id(format!("m{i}"))
            .with_header("tenant", if i % 2 == 0 { "acme" } else { "other" });
        t.publish(&m).await.unwrap();
    }
    park_all(&t, &reasons).await;

    let o = run(args(&[
        "parked",
        "list",
        "--config",
        c.path(),
        "--output",
        "json",
    ]))
    .await;
    assert_exit(&o, 0);
    let v = json(&o);
    assert_eq!(v["matched"], 4, "{v}");
    assert_eq!(v["by_reason"]["DOWNSTREAM_TIMEOUT"], 3, "{v}");
    assert_eq!(v["by_reason"]["SCHEMA_V1"], 1, "{v}");
    assert_eq!(v["messages"][0]["origin"]["queue"], queue.as_str(), "{v}");
    assert_eq!(v["messages"][0]["attempts"], 3, "{v}");
    let o = run(args(&[
        "parked",
        "list",
        "--config",
        c.path(),
        "-o",
        "json",
        "--header",
        "tenant=acme",
    ]))
    .await;
    assert_exit(&o, 0);
    assert_eq!(json(&o)["matched"], 2, "m0 and m2 are acme's");
    let o = run(args(&[
        "parked",
        "show",
        "--config",
        c.path(),
        "m1",
        "--body",
    ]))
    .await;
    assert_exit(&o, 0);
    assert!(
        stdout(&o).contains("SCHEMA_V1") && stdout(&o).contains("{\"n\":1}"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        lot_ids(&t).await,
        ["m0", "m1", "m2", "m3"],
        "browsing consumed nothing"
    );

    let base = [
        "parked",
        "redrive",
        "--config",
        c.path(),
        "--reason",
        "DOWNSTREAM_TIMEOUT",
        "--operator",
        "ops-carol",
        "--replay-reason",
        "gateway fixed",
        "-o",
        "json",
    ];
    let mut dry = args(&base);
    dry.push("--dry-run".into());
    let o = run(dry).await;
    assert_exit(&o, 0);
    let r = json(&o);
    assert_eq!(
        (
            r["matched"].as_u64(),
            r["moved"].as_u64(),
            r["dry_run"].as_bool()
        ),
        (Some(3), Some(0), Some(true)),
        "{r}"
    );
    assert_eq!(lot_ids(&t).await.len(), 4, "dry run changed nothing");

    let mut limited = args(&base);
    limited.extend(args(&["--limit", "2", "--rate", "20"]));
    let o = run(limited).await;
    assert_exit(&o, 0);
    let r = json(&o);
    assert_eq!(
        (r["moved"].as_u64(), r["failed"].as_u64()),
        (Some(2), Some(0)),
        "{r}"
    );
    let audit = stderr(&o);
    assert!(
        audit.contains("ops-carol") && audit.contains("gateway fixed"),
        "audit line: {audit}"
    );
    let left = lot_ids(&t).await;
    assert_eq!(left.len(), 2, "the limit held: {left:?}");
    assert!(left.contains(&"m1".to_owned()), "SCHEMA_V1 stays: {left:?}");
    // The moved messages are back on the source queue, with replay headers.
    let mut moved = Vec::new();
    while moved.len() < 2 {
        let d = tokio::time::timeout(Duration::from_secs(30), t.receive())
            .await
            .expect("the replayed messages within 30 s")
            .unwrap()
            .unwrap();
        let replay = Envelope::decode(&d.message.headers)
            .replay
            .expect("replay headers");
        assert_eq!(
            (
                replay.by.as_str(),
                replay.reason.as_str(),
                replay.original_attempts
            ),
            ("ops-carol", "gateway fixed", 3)
        );
        assert_eq!(replay.id, r["replay_id"].as_str().unwrap());
        moved.push(d.message.id.clone().unwrap_or_default());
        t.settle(d, parkway::Settle::Ack).await.unwrap();
    }
    moved.extend(left);
    moved.sort();
    assert_eq!(moved, ["m0", "m1", "m2", "m3"], "each message in one place");
    t.delete_queues().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_apply_creates_what_verify_mode_needs() {
    let (queue, c) = config_file();
    let (config, settings, policy) = settings(&c);
    let o = run(args(&["topology", "plan", "--config", c.path()])).await;
    assert_exit(&o, 0);
    let plan = stdout(&o);
    assert!(
        plan.contains(&format!("queue `{queue}-dlq`"))
            && plan.contains("maxReceiveCount 8 (largest max_attempts 3 + receive_margin 5)"),
        "{plan}"
    );
    let mut verify = settings.clone();
    verify.topology = TopologyMode::Verify;
    let before = SqsTransport::connect(verify.clone(), [&policy]).await;
    assert!(before.is_err(), "plan created nothing");
    let o = run(args(&["topology", "apply", "--config", c.path()])).await;
    assert_exit(&o, 0);
    assert!(stdout(&o).contains("maxReceiveCount 8"), "{}", stdout(&o));
    let after = SqsTransport::connect(verify, [&policy])
        .await
        .unwrap_or_else(|e| panic!("after apply, both queues exist: {}", unreachable(e)));
    assert_eq!(after.max_receive_count(), 8);
    assert_eq!(
        parkway::plan(&config).unwrap().capabilities,
        after.capabilities()
    );
    after.delete_queues().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_commands_never_create_a_misspelt_queue() {
    let (queue, c) = config_file();
    let (_, settings, _) = settings(&c);
    let o = run(args(&["parked", "list", "--config", c.path()])).await;
    assert_exit(&o, 2);
    let err = stderr(&o);
    assert!(
        err.contains(&queue) || err.contains(&format!("{queue}-dlq")),
        "names the queue: {err}"
    );
    let mut verify = settings;
    verify.topology = TopologyMode::Verify;
    let once = RetryPolicy::builder().max_attempts(1).build().unwrap();
    assert!(
        SqsTransport::connect(verify, [&once]).await.is_err(),
        "list created nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_endpoint_is_exit_2_naming_it() {
    let c = ConfigFile::new(
        "kind = \"sqs\"\nqueue = \"q\"\nregion = \"us-east-1\"\nendpoint = \"http://127.0.0.1:1\"\ncredentials = \"emulator\"\nwait_time = \"1s\"\ncall_timeout = \"3s\"",
        POLICY,
    );
    let o = run(args(&["parked", "list", "--config", c.path()])).await;
    assert_exit(&o, 2);
    let err = stderr(&o);
    assert!(
        err.contains("no answer from SQS at endpoint `http://127.0.0.1:1`"),
        "{err}"
    );
}
