//! Seed 002's ledger: TXN-100 / TXN-101 / TXN-102 on one account, TXN-101
//! failing twice. Pause-partition mode applies them in offset order (and
//! rejects TXN-102); retry-topic mode lets TXN-102 overtake TXN-101 — which
//! is why ledgers must not use it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use parkway::{Backoff, Failure, Handler, Message, Ordering, RetryPolicy, Worker};

use crate::conformance::harness::{WITHIN, eventually};

#[derive(Clone, Default)]
struct Ledger {
    balance: Arc<Mutex<i64>>,
    applied: Arc<Mutex<Vec<String>>>,
    rejected: Arc<Mutex<Vec<String>>>,
    tries: Arc<Mutex<HashMap<String, u32>>>,
}

impl Handler for Ledger {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        // "<txn> <deposit|withdraw> <amount> [fail:N]"
        let text = String::from_utf8_lossy(&msg.body).into_owned();
        let parts: Vec<&str> = text.split_whitespace().collect();
        let (txn, op, amount) = (
            parts[0].to_owned(),
            parts[1],
            parts[2].parse::<i64>().unwrap(),
        );
        let n = {
            let mut t = self.tries.lock().unwrap();
            let n = t.entry(txn.clone()).or_default();
            *n += 1;
            *n
        };
        if let Some(k) = parts.get(3).and_then(|f| f.strip_prefix("fail:")) {
            if n <= k.parse().unwrap() {
                return Err(Failure::transient("LEDGER_DB_TIMEOUT"));
            }
        }
        let mut balance = self.balance.lock().unwrap();
        if op == "withdraw" && *balance < amount {
            self.rejected.lock().unwrap().push(txn.clone());
            return Err(Failure::business("INSUFFICIENT_FUNDS"));
        }
        *balance += if op == "deposit" { amount } else { -amount };
        self.applied.lock().unwrap().push(txn);
        Ok(())
    }
}

async fn run(ordering: Ordering) -> Ledger {
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::fixed(Duration::from_millis(300)))
        .ordering(ordering)
        .build()
        .unwrap();
    let t = crate::transport(&policy, 3, |_| {}).await;
    for (txn, body) in [
        ("TXN-100", "TXN-100 deposit 1000"),
        ("TXN-101", "TXN-101 withdraw 500 fail:2"),
        ("TXN-102", "TXN-102 withdraw 700"),
    ] {
        t.publish(
            &Message::new("ledger", body)
                .with_id(txn)
                .with_key("account-42"),
        )
        .await
        .unwrap();
    }
    let ledger = Ledger::default();
    let worker = Worker::builder(Arc::new(t.clone()), ledger.clone())
        .policy(policy)
        .build()
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    eventually(WITHIN, "all three transactions settled", || async {
        ledger.applied.lock().unwrap().len() + ledger.rejected.lock().unwrap().len() == 3
    })
    .await;
    let _ = tx.send(());
    running.await.unwrap().unwrap();
    t.close().await;
    ledger
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_partition_mode_applies_the_ledger_in_order() {
    let l = run(Ordering::Ordered).await;
    assert_eq!(*l.applied.lock().unwrap(), ["TXN-100", "TXN-101"]);
    assert_eq!(*l.rejected.lock().unwrap(), ["TXN-102"], "700 > 500 left");
    assert_eq!(*l.balance.lock().unwrap(), 500);
    assert_eq!(
        l.tries.lock().unwrap()["TXN-101"],
        3,
        "retried in place twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_topic_mode_does_not_keep_the_order() {
    let l = run(Ordering::Unordered).await;
    // TXN-102 overtakes the retried TXN-101, which then bounces: the
    // outcome differs from the ledger's true order. Documented: use
    // pause-partition mode where order is a business invariant.
    assert_eq!(*l.applied.lock().unwrap(), ["TXN-100", "TXN-102"]);
    assert_eq!(*l.rejected.lock().unwrap(), ["TXN-101"]);
    assert_eq!(*l.balance.lock().unwrap(), 300);
}
