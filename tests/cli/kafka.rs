//! The CLI against a real Kafka-protocol broker (`scripts/kafka-start`;
//! `PARKWAY_KAFKA_BOOTSTRAP` overrides the address), each test on its own
//! randomly named topic.

use std::time::Duration;

use parkway::{Envelope, RetryPolicy, Transport};
use parkway_kafka::{KafkaConfig, KafkaTransport};

use crate::{ConfigFile, POLICY, args, assert_exit, json, park_all, run, stderr};

fn bootstrap() -> String {
    std::env::var("PARKWAY_KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_dry_run_and_redrive_on_the_dead_letter_topic() {
    let topic = format!("pw-cli-{:08x}", fastrand::u32(..));
    parkway_kafka::create_topic(&bootstrap(), &topic, 1)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach Kafka at {}: {e}\n  run scripts/kafka-start first",
                bootstrap()
            )
        });
    let transport_toml = format!(
        "kind = \"kafka\"\nbootstrap_servers = \"{}\"\ngroup_id = \"{topic}-group\"\ntopic = \"{topic}\"\nlibrdkafka = {{ \"fetch.wait.max.ms\" = \"20\", \"session.timeout.ms\" = \"6000\" }}",
        bootstrap()
    );
    let c = ConfigFile::new(&transport_toml, POLICY);
    let config = parkway::config::Config::load(c.path()).unwrap();
    let policy: RetryPolicy = config.router.policies().next().unwrap().policy.clone();
    let settings = KafkaConfig::from_settings(&config.transport.settings).unwrap();
    let t = KafkaTransport::connect(settings, [&policy])
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach Kafka at {}: {e}\n  run scripts/kafka-start first",
                bootstrap()
            )
        });
    // The offline plan (`parkway check`) states what the transport states.
    assert_eq!(
        parkway::plan(&config).unwrap().capabilities,
        t.capabilities()
    );
    let reasons = ["DOWNSTREAM_TIMEOUT", "SCHEMA_V1", "DOWNSTREAM_TIMEOUT"];
    for i in 0..reasons.len() {
        let m = parkway::Message::new("cli", format!("{{\"n\":{i}}}")).with_id(format!("m{i}"));
        t.publish(&m).await.unwrap();
    }
    park_all(&t, &reasons).await;

    let o = run(args(&[
        "parked",
        "list",
        "--config",
        c.path(),
        "-o",
        "json",
    ]))
    .await;
    assert_exit(&o, 0);
    let v = json(&o);
    assert_eq!(v["matched"], 3, "{v}");
    assert_eq!(v["by_reason"]["DOWNSTREAM_TIMEOUT"], 2, "{v}");
    assert_eq!(v["messages"][0]["origin"]["queue"], topic.as_str(), "{v}");

    let base = [
        "parked",
        "redrive",
        "--config",
        c.path(),
        "--reason",
        "DOWNSTREAM_TIMEOUT",
        "--operator",
        "ops-bob",
        "--replay-reason",
        "db failover done",
        "-o",
        "json",
    ];
    let mut dry = args(&base);
    dry.push("--dry-run".into());
    let o = run(dry).await;
    assert_exit(&o, 0);
    assert_eq!(
        (json(&o)["matched"].as_u64(), json(&o)["moved"].as_u64()),
        (Some(2), Some(0))
    );

    let o = run(args(&base)).await;
    assert_exit(&o, 0);
    let r = json(&o);
    assert_eq!(
        (r["moved"].as_u64(), r["failed"].as_u64()),
        (Some(2), Some(0)),
        "{r}"
    );
    assert!(stderr(&o).contains("ops-bob"), "audit line: {}", stderr(&o));

    // What moved is no longer listed (the replay index), and is back on the
    // source topic with its replay headers.
    let o = run(args(&[
        "parked",
        "list",
        "--config",
        c.path(),
        "-o",
        "json",
    ]))
    .await;
    assert_exit(&o, 0);
    assert_eq!(
        json(&o)["matched"],
        1,
        "only SCHEMA_V1 is left: {}",
        json(&o)
    );
    let o = run(args(&base)).await;
    assert_exit(&o, 0);
    assert_eq!(json(&o)["moved"], 0, "a second run replays nothing twice");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let d = tokio::time::timeout(Duration::from_secs(30), t.receive())
            .await
            .expect("the replayed records within 30 s")
            .unwrap()
            .unwrap();
        let replay = Envelope::decode(&d.message.headers)
            .replay
            .expect("replay headers");
        assert_eq!(replay.by, "ops-bob");
        seen.push(d.message.id.clone().unwrap_or_default());
        t.settle(d, parkway::Settle::Ack).await.unwrap();
    }
    seen.sort();
    assert_eq!(seen, ["m0", "m2"]);
    t.close().await;
}
