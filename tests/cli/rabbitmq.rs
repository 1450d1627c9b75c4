//! The CLI against a real RabbitMQ (`scripts/rabbitmq-start`;
//! `PARKWAY_RABBITMQ_URL` overrides the address), each test on its own
//! randomly named queue.

use parkway::{Envelope, RetryPolicy, Transport};
use parkway_rabbitmq::{RabbitConfig, RabbitTransport, TopologyMode};

use crate::{ConfigFile, POLICY, args, assert_exit, json, park_all, run, stderr, stdout};

fn url() -> String {
    std::env::var("PARKWAY_RABBITMQ_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

fn policy() -> RetryPolicy {
    let c = ConfigFile::new("kind = \"memory\"", POLICY);
    let config = parkway::config::Config::load(c.path()).unwrap();
    config.router.policies().next().unwrap().policy.clone()
}

/// A fresh queue, its transport, and a config file naming it.
async fn setup() -> (RabbitTransport, ConfigFile) {
    let queue = format!("pw-cli-{:08x}", fastrand::u32(..));
    let t = RabbitTransport::connect(RabbitConfig::new(url(), queue.clone()), [&policy()])
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach RabbitMQ at {}: {e}\n  run scripts/rabbitmq-start first",
                url()
            )
        });
    let file = ConfigFile::new(
        &format!(
            "kind = \"rabbitmq\"\nurl = \"{}\"\nqueue = \"{queue}\"",
            url()
        ),
        POLICY,
    );
    (t, file)
}

/// Publishes and parks one message per reason.
async fn parked(t: &RabbitTransport, reasons: &[&str]) {
    for (i, _) in reasons.iter().enumerate() {
        let m = parkway::Message::new("cli", format!("{{\"n\":{i}}}"))
            .with_id(format!("m{i}"))
            .with_header("tenant", if i % 2 == 0 { "acme" } else { "other" });
        t.publish(&m).await.unwrap();
    }
    park_all(t, reasons).await;
}

async fn teardown(t: &RabbitTransport) {
    let _ = t.delete_topology().await;
    t.close().await;
}

async fn lot_ids(t: &RabbitTransport) -> Vec<String> {
    t.parking_lot()
        .browse(1000)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|p| p.message.id)
        .collect()
}

/// Runs the binary off the async runtime (it starts its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_show_read_the_parking_queue_without_consuming() {
    let (t, c) = setup().await;
    parked(
        &t,
        &["DOWNSTREAM_TIMEOUT", "SCHEMA_V1", "DOWNSTREAM_TIMEOUT"],
    )
    .await;
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
    assert_eq!(v["matched"], 3, "{v}");
    assert_eq!(v["by_reason"]["DOWNSTREAM_TIMEOUT"], 2, "{v}");
    assert_eq!(v["by_reason"]["SCHEMA_V1"], 1, "{v}");
    let m = &v["messages"][0];
    assert_eq!(
        (m["message_id"].as_str(), m["attempts"].as_u64()),
        (Some("m0"), Some(3))
    );
    assert_eq!(m["class"], "transient");
    assert!(m["age_seconds"].as_u64().unwrap() >= 90, "{m}");
    // Filters: class and header.
    let o = run(args(&[
        "parked",
        "list",
        "--config",
        c.path(),
        "-o",
        "json",
        "--class",
        "transient",
        "--header",
        "tenant=acme",
    ]))
    .await;
    assert_exit(&o, 0);
    assert_eq!(json(&o)["matched"], 2, "m0 and m2 are transient and acme");
    // The table groups by reason, with counts.
    let o = run(args(&["parked", "list", "--config", c.path()])).await;
    assert_exit(&o, 0);
    let table = stdout(&o);
    assert!(
        table.contains("DOWNSTREAM_TIMEOUT — 2 message(s)"),
        "{table}"
    );
    assert!(table.contains("SCHEMA_V1 — 1 message(s)"), "{table}");
    // Show one, with its body.
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
        ["m0", "m1", "m2"],
        "browsing consumed nothing"
    );
    teardown(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_changes_nothing_and_redrive_moves_only_matches() {
    let (t, c) = setup().await;
    parked(
        &t,
        &[
            "DOWNSTREAM_TIMEOUT",
            "SCHEMA_V1",
            "DOWNSTREAM_TIMEOUT",
            "DOWNSTREAM_TIMEOUT",
        ],
    )
    .await;
    let base = [
        "parked",
        "redrive",
        "--config",
        c.path(),
        "--reason",
        "DOWNSTREAM_TIMEOUT",
        "--operator",
        "ops-alice",
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
    assert!(
        stderr(&o).contains("redrive finished"),
        "the audit line: {}",
        stderr(&o)
    );
    assert_eq!(lot_ids(&t).await.len(), 4, "dry run changed nothing");

    let mut limited = args(&base);
    limited.extend(args(&["--limit", "2", "--rate", "20"]));
    let o = run(limited).await;
    assert_exit(&o, 0);
    let r = json(&o);
    assert_eq!(
        (r["moved"].as_u64(), r["left"].as_u64()),
        (Some(2), Some(1)),
        "{r}"
    );
    let audit = stderr(&o);
    assert!(
        audit.contains("ops-alice") && audit.contains("gateway fixed"),
        "{audit}"
    );
    assert_eq!(
        lot_ids(&t).await,
        ["m1", "m3"],
        "the schema error and the third timeout stay"
    );
    // The moved messages are back on the work queue, with replay headers.
    for want in ["m0", "m2"] {
        let d = tokio::time::timeout(std::time::Duration::from_secs(10), t.receive())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(d.message.id.as_deref(), Some(want));
        let replay = Envelope::decode(&d.message.headers)
            .replay
            .expect("replay headers");
        assert_eq!(
            (
                replay.by.as_str(),
                replay.reason.as_str(),
                replay.original_attempts
            ),
            ("ops-alice", "gateway fixed", 3)
        );
        assert_eq!(replay.id, r["replay_id"].as_str().unwrap());
        t.settle(d, parkway::Settle::Ack).await.unwrap();
    }
    teardown(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_apply_declares_what_verify_mode_needs() {
    let queue = format!("pw-cli-{:08x}", fastrand::u32(..));
    let c = ConfigFile::new(
        &format!(
            "kind = \"rabbitmq\"\nurl = \"{}\"\nqueue = \"{queue}\"",
            url()
        ),
        POLICY,
    );
    let o = run(args(&["topology", "plan", "--config", c.path()])).await;
    assert_exit(&o, 0);
    assert!(
        stdout(&o).contains(&format!("{queue}.wait.200ms")),
        "{}",
        stdout(&o)
    );
    let mut verify = RabbitConfig::new(url(), queue.clone());
    verify.topology = TopologyMode::Verify;
    let before = RabbitTransport::connect(verify.clone(), [&policy()]).await;
    assert!(before.is_err(), "plan declared nothing");
    let o = run(args(&["topology", "apply", "--config", c.path()])).await;
    assert_exit(&o, 0);
    assert!(
        stdout(&o).contains(&format!("wait queue `{queue}.wait.200ms`: in place")),
        "{}",
        stdout(&o)
    );
    let after = RabbitTransport::connect(verify, [&policy()])
        .await
        .expect("after apply, every piece exists");
    // The offline plan states what the connected transport states.
    let config = parkway::config::Config::load(c.path()).unwrap();
    assert_eq!(
        parkway::plan(&config).unwrap().capabilities,
        after.capabilities()
    );
    teardown(&after).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_broker_is_exit_2_naming_it() {
    let c = ConfigFile::new(
        "kind = \"rabbitmq\"\nurl = \"amqp://guest:guest@127.0.0.1:1/%2f\"\nqueue = \"q\"",
        POLICY,
    );
    let o = run(args(&["parked", "list", "--config", c.path()])).await;
    assert_exit(&o, 2);
    let err = stderr(&o);
    assert!(
        err.contains("rabbitmq") && err.contains("127.0.0.1:1"),
        "{err}"
    );
    assert!(
        !err.contains("guest:guest"),
        "the password is never shown: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_fails_again_stops_the_redrive_with_exit_3() {
    let (t, c) = setup().await;
    parked(&t, &["DOWNSTREAM_TIMEOUT"; 4]).await;
    // A consumer whose fix did not work: every replayed message fails again.
    let consumer = {
        let t = t.clone();
        tokio::spawn(async move {
            while let Ok(Some(d)) = t.receive().await {
                park_again(&t, d).await;
            }
        })
    };
    let o = run(args(&[
        "parked",
        "redrive",
        "--config",
        c.path(),
        "--operator",
        "ops-alice",
        "--replay-reason",
        "trying the fix",
        "--canary",
        "1",
        "--canary-wait",
        "2s",
        "-o",
        "json",
    ]))
    .await;
    assert_exit(&o, 3);
    let r = json(&o);
    assert_eq!(
        (r["moved"].as_u64(), r["failed_again"].as_u64()),
        (Some(1), Some(1)),
        "{r}"
    );
    assert!(
        r["aborted"].as_str().unwrap_or("").contains("canary"),
        "{r}"
    );
    assert_eq!(
        lot_ids(&t).await.len(),
        4,
        "the canary is parked again; the rest never moved"
    );
    consumer.abort();
    teardown(&t).await;
}

/// Parks a delivery again as a failed attempt of the replayed message.
async fn park_again(t: &RabbitTransport, d: parkway::Delivery) {
    let mut headers = d.message.headers.clone();
    let mut env = Envelope::decode(&headers);
    env.attempts = 1;
    env.reason = Some(parkway::Reason::parse("DOWNSTREAM_TIMEOUT").unwrap());
    env.encode(&mut headers, &parkway::EnvelopeLimits::default());
    t.settle(d, parkway::Settle::Park { headers })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_commands_never_declare_a_misspelt_queue() {
    let queue = format!("pw-cli-missing-{:08x}", fastrand::u32(..));
    let c = ConfigFile::new(
        &format!(
            "kind = \"rabbitmq\"\nurl = \"{}\"\nqueue = \"{queue}\"",
            url()
        ),
        POLICY,
    );
    let o = run(args(&["parked", "list", "--config", c.path()])).await;
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains(&queue),
        "names the queue: {}",
        stderr(&o)
    );
    let mut verify = RabbitConfig::new(url(), queue);
    verify.topology = TopologyMode::Verify;
    let once = RetryPolicy::builder().max_attempts(1).build().unwrap();
    assert!(
        RabbitTransport::connect(verify, [&once]).await.is_err(),
        "list created nothing"
    );
}
