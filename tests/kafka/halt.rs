//! `on_exhausted = "halt"` in pause-partition mode: only the failing
//! partition stops, nothing behind the halted record runs or is committed,
//! and an operator — here from a second client, as `parkway kafka` does —
//! resumes it or skips it to the dead-letter topic.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering as AtomicOrdering},
    },
    time::Duration,
};

use parkway::{
    Backoff, Failure, Handler, Message, OnExhausted, Ordering, RetryPolicy, Transport, Worker,
};
use parkway_kafka::{HaltedRecord, KafkaTransport, OperatorAction};

use crate::conformance::harness::{WITHIN, eventually};

#[derive(Clone, Default)]
struct Ledger {
    fixed: Arc<AtomicBool>,
    applied: Arc<Mutex<Vec<String>>>,
}

impl Handler for Ledger {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        let id = msg.id.clone().unwrap_or_default();
        if id == "TXN-POISON" && !self.fixed.load(AtomicOrdering::SeqCst) {
            return Err(Failure::transient("LEDGER_DB_TIMEOUT"));
        }
        self.applied.lock().unwrap().push(id);
        Ok(())
    }
}

struct Setup {
    t: KafkaTransport,
    operator: KafkaTransport,
    ledger: Ledger,
    halted: HaltedRecord,
    stop: tokio::sync::oneshot::Sender<()>,
    running: tokio::task::JoinHandle<Result<parkway::RunSummary, parkway::WorkerError>>,
}

fn applied(l: &Ledger) -> Vec<String> {
    l.applied.lock().unwrap().clone()
}

/// TXN-POISON halts its partition; TXN-AFTER (same key) waits behind it;
/// ten other accounts, published after the halt, flow where they can.
async fn halted_ledger() -> Setup {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_millis(100)))
        .ordering(Ordering::Ordered)
        .on_exhausted(OnExhausted::Halt)
        .build()
        .unwrap();
    let t = crate::transport(&policy, 2, |_| {}).await;
    for id in ["TXN-BEFORE", "TXN-POISON", "TXN-AFTER"] {
        t.publish(&Message::new("ledger", id).with_id(id).with_key("account-7"))
            .await
            .unwrap();
    }
    let ledger = Ledger::default();
    let worker = Worker::builder(Arc::new(t.clone()), ledger.clone())
        .policy(policy.clone())
        .build()
        .unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    eventually(WITHIN, "the poison record halts its partition", || async {
        t.halted().len() == 1
    })
    .await;
    let halted = t.halted().remove(0);
    assert_eq!(halted.topic, t.topic());
    assert_eq!(halted.reason.as_deref(), Some("LEDGER_DB_TIMEOUT"));
    assert_eq!(applied(&ledger), ["TXN-BEFORE"]);

    for n in 0..10 {
        let id = format!("TXN-OTHER-{n}");
        let key = format!("account-{}", 100 + n);
        t.publish(&Message::new("ledger", id.clone()).with_id(id).with_key(key))
            .await
            .unwrap();
    }
    eventually(WITHIN, "other partitions keep flowing", || async {
        applied(&ledger).iter().any(|a| a.starts_with("TXN-OTHER"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !applied(&ledger).contains(&"TXN-AFTER".to_owned()),
        "nothing behind the halted record ran: {:?}",
        applied(&ledger)
    );
    assert!(
        applied(&ledger).len() < 12,
        "the accounts on the halted partition wait too: {:?}",
        applied(&ledger)
    );

    let operator = KafkaTransport::connect(t.config().clone(), [&policy])
        .await
        .unwrap();
    eventually(
        WITHIN,
        "the halt is announced on the control topic",
        || async {
            operator
                .announced_halts()
                .await
                .is_ok_and(|h| h.iter().any(|h| h.offset == halted.offset))
        },
    )
    .await;
    Setup {
        t,
        operator,
        ledger,
        halted,
        stop,
        running,
    }
}

async fn finish(s: Setup) -> parkway::RunSummary {
    let _ = s.stop.send(());
    let summary = tokio::time::timeout(Duration::from_secs(30), s.running)
        .await
        .expect("the worker stops")
        .unwrap()
        .unwrap();
    s.t.close().await;
    s.operator.close().await;
    summary
}

async fn request(s: &Setup, action: OperatorAction, offset: i64) -> Result<String, String> {
    s.operator
        .request(
            action,
            (&s.halted.topic, s.halted.partition, offset),
            "ops-test",
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halt_stops_one_partition_until_an_operator_resumes_it() {
    let s = halted_ledger().await;
    let wrong = request(&s, OperatorAction::Resume, s.halted.offset + 1000)
        .await
        .expect_err("no record is halted at that offset");
    assert!(
        wrong.contains("no record of this consumer is halted"),
        "{wrong}"
    );
    assert_eq!(s.t.halted().len(), 1, "a refused action changes nothing");

    s.ledger.fixed.store(true, AtomicOrdering::SeqCst);
    let done = request(&s, OperatorAction::Resume, s.halted.offset)
        .await
        .unwrap();
    assert!(done.contains("resume applied"), "{done}");
    eventually(WITHIN, "everything applied after the resume", || async {
        applied(&s.ledger).len() == 13
    })
    .await;
    let order = applied(&s.ledger);
    let at = |id: &str| order.iter().position(|a| a == id).unwrap();
    assert!(at("TXN-BEFORE") < at("TXN-POISON") && at("TXN-POISON") < at("TXN-AFTER"));
    assert!(s.t.halted().is_empty());
    eventually(WITHIN, "the control topic shows no open halt", || async {
        s.operator
            .announced_halts()
            .await
            .is_ok_and(|h| h.is_empty())
    })
    .await;
    let summary = finish(s).await;
    assert_eq!(summary.halted, 1);
    assert_eq!(summary.parked, 0);
}

/// Runs the `parkway` binary with a config file for `s`'s topic.
async fn cli(s: &Setup, args: &[&str]) -> (bool, String, String) {
    let c = s.t.config();
    let path = std::env::temp_dir().join(format!("{}-cli.toml", c.topic));
    std::fs::write(
        &path,
        format!(
            "[transport]\nkind = \"kafka\"\nbootstrap_servers = \"{}\"\ngroup_id = \"{}\"\ntopic = \"{}\"\n\n[policies.ledger]\nmax_attempts = 3\n",
            c.bootstrap_servers, c.group_id, c.topic
        ),
    )
    .unwrap();
    let mut all: Vec<String> = vec!["kafka".into()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all.extend(["--config".into(), path.display().to_string()]);
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_parkway"))
            .args(&all)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_to_dlt_parks_the_halted_record_and_the_partition_goes_on() {
    let s = halted_ledger().await;
    // The operator's way: the CLI, from another process.
    let (ok, listed, err) = cli(&s, &["halted", "--output", "json"]).await;
    assert!(ok, "{err}");
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["offset"], s.halted.offset, "{listed}");
    assert_eq!(listed[0]["reason"], "LEDGER_DB_TIMEOUT");
    let (partition, offset) = (s.halted.partition.to_string(), s.halted.offset.to_string());
    let (ok, _, err) = cli(
        &s,
        &[
            "skip-to-dlt",
            "--partition",
            &partition,
            "--offset",
            "999999",
            "--operator",
            "ops-test",
        ],
    )
    .await;
    assert!(
        !ok && err.contains("no record of this consumer is halted"),
        "{err}"
    );
    let (ok, done, err) = cli(
        &s,
        &[
            "skip-to-dlt",
            "--partition",
            &partition,
            "--offset",
            &offset,
            "--operator",
            "ops-test",
        ],
    )
    .await;
    assert!(ok, "{err}");
    assert!(done.contains("skip-to-dlt applied"), "{done}");
    eventually(WITHIN, "the rest of the partition applied", || async {
        applied(&s.ledger).len() == 12
    })
    .await;
    assert!(!applied(&s.ledger).contains(&"TXN-POISON".to_owned()));
    let parked = s.t.parking_lot().browse(100).await.unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].message.id.as_deref(), Some("TXN-POISON"));
    assert_eq!(parked[0].envelope.attempts, 3);
    assert_eq!(
        parked[0].envelope.reason.as_ref().map(ToString::to_string),
        Some("LEDGER_DB_TIMEOUT".to_owned())
    );
    finish(s).await;
}
