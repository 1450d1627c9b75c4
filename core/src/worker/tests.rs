//! Worker behaviour on the in-memory transport, with paused time.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use super::*;
use crate::{
    Backoff, Envelope, Failure, Message, OnExhausted, Ordering, RetryPolicy, SeededDice,
    memory::MemoryTransport, transport::ParkingLot,
};

/// Fails each message per its body: `ok`, `fail:N` (transient N times),
/// `bad` (permanent), `forever`, `panic`, `slow`.
#[derive(Clone, Default)]
struct Scripted {
    seen: Arc<Mutex<HashMap<String, u32>>>,
    order: Arc<Mutex<Vec<String>>>,
}

impl Handler for Scripted {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        let body = std::str::from_utf8(&msg.body).unwrap_or("").to_owned();
        let id = msg.id.clone().unwrap_or_default();
        let n = {
            let mut seen = self.seen.lock().unwrap();
            let n = seen.entry(id.clone()).or_default();
            *n += 1;
            *n
        };
        match body.split_once(':') {
            Some(("fail", k)) if n <= k.parse().unwrap_or(0) => {
                return Err(Failure::transient("DOWNSTREAM_TIMEOUT"));
            }
            _ => {}
        }
        match body.as_str() {
            "bad" => return Err(Failure::permanent("DESERIALIZATION_FAILED")),
            "forever" => return Err(Failure::transient("DOWNSTREAM_TIMEOUT")),
            "panic" => panic!("handler bug"),
            "slow" => tokio::time::sleep(Duration::from_secs(3600)).await,
            _ => {}
        }
        self.order.lock().unwrap().push(id);
        Ok(())
    }
}

impl Scripted {
    fn runs(&self, id: &str) -> u32 {
        self.seen.lock().unwrap().get(id).copied().unwrap_or(0)
    }
}

fn policy() -> crate::policy::RetryPolicyBuilder {
    RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::fixed(Duration::from_secs(1)))
}

fn msg(id: &str, body: &'static str) -> Message {
    Message::new("orders", body).with_id(id)
}

async fn run_until_idle(
    t: &MemoryTransport,
    h: Scripted,
    p: RetryPolicy,
) -> Result<RunSummary, WorkerError> {
    let worker = Worker::builder(Arc::new(t.clone()), h)
        .policy(p)
        .dice(Arc::new(SeededDice::new(1)))
        .handler_timeout(Duration::from_secs(5))
        .build()?;
    let idle = {
        let t = t.clone();
        async move { t.idle().await }
    };
    worker.run(idle).await
}

#[tokio::test(start_paused = true)]
async fn timeouts_and_panics_are_classified_not_fatal() {
    let t = MemoryTransport::new("orders");
    t.publish(msg("slow", "slow"));
    t.publish(msg("panic", "panic"));
    t.publish(msg("ok", "ok"));
    let h = Scripted::default();
    let p = policy().max_attempts(2).build().unwrap();
    let s = run_until_idle(&t, h.clone(), p).await.unwrap();
    assert_eq!(s.acked, 1);
    assert_eq!(s.parked, 2);
    let parked = t.parking_lot().browse(10).await.unwrap();
    let reasons: Vec<_> = parked
        .iter()
        .map(|p| p.envelope.reason.as_ref().unwrap().to_string())
        .collect();
    assert!(
        reasons.contains(&"HANDLER_TIMEOUT".to_owned()),
        "{reasons:?}"
    );
    assert!(reasons.contains(&"HANDLER_PANIC".to_owned()), "{reasons:?}");
    assert_eq!(h.runs("slow"), 2);
}

#[tokio::test(start_paused = true)]
async fn local_retries_happen_before_broker_retries() {
    let t = MemoryTransport::new("orders");
    t.publish(msg("a", "fail:2"));
    let h = Scripted::default();
    let p = policy().local_attempts(3).build().unwrap();
    let s = run_until_idle(&t, h.clone(), p).await.unwrap();
    assert_eq!((s.acked, s.retried), (1, 0));
    assert_eq!(h.runs("a"), 3);
    assert_eq!(t.stats().delivered, 1);
}

#[tokio::test(start_paused = true)]
async fn a_refused_park_is_not_lost() {
    let t = MemoryTransport::new("orders");
    t.publish(msg("bad", "bad"));
    t.fail_next(1);
    let s = run_until_idle(&t, Scripted::default(), policy().build().unwrap())
        .await
        .unwrap();
    assert_eq!(s.unsettled, 1);
    assert_eq!(t.parked_len(), 1, "parked on the redelivery");
    assert_eq!(t.stats().acked, 0);
}

#[tokio::test(start_paused = true)]
async fn halt_stops_the_worker_and_leaves_the_message() {
    let t = MemoryTransport::new("orders");
    t.publish(msg("f", "forever"));
    let p = policy()
        .max_attempts(2)
        .on_exhausted(OnExhausted::Halt)
        .build()
        .unwrap();
    let err = run_until_idle(&t, Scripted::default(), p)
        .await
        .unwrap_err();
    assert!(matches!(err, WorkerError::Halted { .. }), "{err}");
    assert!(err.to_string().contains("message f"), "{err}");
    assert_eq!(t.ready_len(), 1, "released, not acked");
    assert_eq!(t.stats().acked, 0);
}

#[tokio::test(start_paused = true)]
async fn ordered_mode_keeps_order_per_key_while_others_flow() {
    let t = MemoryTransport::new("ledger");
    for (id, body, key) in [
        ("a1", "ok", "A"),
        ("a2", "fail:2", "A"),
        ("a3", "ok", "A"),
        ("b1", "ok", "B"),
        ("b2", "ok", "B"),
    ] {
        t.publish(Message::new("ledger", body).with_id(id).with_key(key));
    }
    let h = Scripted::default();
    let p = policy().ordering(Ordering::Ordered).build().unwrap();
    run_until_idle(&t, h.clone(), p).await.unwrap();
    let order = h.order.lock().unwrap().clone();
    let pos = |id: &str| order.iter().position(|x| x == id).unwrap();
    assert!(pos("a1") < pos("a2") && pos("a2") < pos("a3"), "{order:?}");
    assert!(
        pos("b2") < pos("a2"),
        "B must not wait for A's retries: {order:?}"
    );
    assert_eq!(t.stats().retried, 0, "ordered mode retries in place");
}

#[tokio::test(start_paused = true)]
async fn shutdown_finishes_in_flight_and_releases_the_rest() {
    let t = MemoryTransport::new("ledger");
    for id in ["1", "2", "3"] {
        t.publish(Message::new("ledger", "fail:1").with_id(id).with_key("K"));
    }
    let h = Scripted::default();
    let p = policy().ordering(Ordering::Ordered).build().unwrap();
    let worker = Worker::builder(Arc::new(t.clone()), h.clone())
        .policy(p)
        .build()
        .unwrap();
    let shutdown = tokio::time::sleep(Duration::from_millis(500));
    let s = worker.run(shutdown).await.unwrap();
    // "1" was in flight (waiting to retry in place) and finished.
    assert_eq!(h.runs("1"), 2);
    assert_eq!(s.acked, 1);
    assert_eq!(h.runs("2") + h.runs("3"), 0, "unstarted work never runs");
    assert_eq!(t.ready_len(), 2, "unstarted work is handed back");
    assert_eq!(t.stats().acked, 1);
}

#[tokio::test(start_paused = true)]
async fn forged_low_attempt_header_buys_no_retries() {
    let t = MemoryTransport::new("orders");
    t.publish(msg("f", "forever"));
    let h = Scripted::default();
    let p = policy().max_attempts(3).build().unwrap();
    // A handler-side forger: every redelivery arrives claiming attempt 0.
    let worker = Worker::builder(Arc::new(Forger(t.clone())), h.clone())
        .policy(p)
        .build()
        .unwrap();
    let idle = {
        let t = t.clone();
        async move { t.idle().await }
    };
    worker.run(idle).await.unwrap();
    assert_eq!(h.runs("f"), 3, "the broker's count caps the attempts");
    let parked = t.parking_lot().browse(1).await.unwrap();
    assert_eq!(parked[0].envelope.attempts, 3);
}

/// Wraps the memory transport and rewrites the attempt header to 0 on every
/// delivery, as a hostile producer would.
#[derive(Debug)]
struct Forger(MemoryTransport);

#[async_trait::async_trait]
impl crate::Transport for Forger {
    fn kind(&self) -> &'static str {
        "forger"
    }
    fn capabilities(&self) -> crate::Capabilities {
        self.0.capabilities()
    }
    async fn receive(&self) -> Result<Option<crate::Delivery>, crate::TransportError> {
        let mut d = self.0.receive().await?;
        if let Some(d) = d.as_mut() {
            let mut env = Envelope::decode(&d.message.headers);
            env.attempts = 0;
            env.encode(&mut d.message.headers, &crate::EnvelopeLimits::default());
        }
        Ok(d)
    }
    async fn settle(&self, d: crate::Delivery, a: crate::Settle) -> Result<(), crate::Unsettled> {
        self.0.settle(d, a).await
    }
    fn parking_lot(&self) -> &dyn ParkingLot {
        self.0.parking_lot()
    }
}

#[test]
fn settings_are_validated() {
    let t: Arc<dyn crate::Transport> = Arc::new(MemoryTransport::new("q"));
    let e = Worker::builder(t.clone(), Scripted::default())
        .concurrency(0)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("concurrency"), "{e}");
    let e = Worker::builder(t, Scripted::default())
        .handler_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("handler_timeout"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_lanes_follow_receive_order_under_concurrency() {
    let t = MemoryTransport::new("ledger");
    let ids: Vec<String> = (0..400).map(|i| format!("m{i:03}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let key = if i % 2 == 0 { "even" } else { "odd" };
        t.publish(
            Message::new("ledger", "ok")
                .with_id(id.clone())
                .with_key(key),
        );
    }
    let h = Scripted::default();
    let p = policy().ordering(Ordering::Ordered).build().unwrap();
    let worker = Worker::builder(Arc::new(t.clone()), h.clone())
        .policy(p)
        .concurrency(16)
        .build()
        .unwrap();
    let idle = t.clone();
    worker.run(async move { idle.idle().await }).await.unwrap();
    let order = h.order.lock().unwrap().clone();
    for parity in [0, 1] {
        let lane: Vec<_> = order
            .iter()
            .filter(|id| id[1..].parse::<usize>().unwrap() % 2 == parity)
            .cloned()
            .collect();
        let mut sorted = lane.clone();
        sorted.sort();
        assert_eq!(lane, sorted, "lane {parity} reordered");
        assert_eq!(lane.len(), 200);
    }
}

#[tokio::test(start_paused = true)]
async fn an_early_retry_waits_for_its_due_time_but_a_forged_one_does_not() {
    let clock = crate::TokioClock::new();
    let t = MemoryTransport::new("orders");
    let due = |d: Duration| {
        let env = Envelope {
            due_at: Some(crate::Clock::now(&clock) + d),
            ..Envelope::default()
        };
        let mut m = msg(
            if d < Duration::from_secs(60) {
                "early"
            } else {
                "forged"
            },
            "ok",
        );
        env.encode(&mut m.headers, &crate::EnvelopeLimits::default());
        m
    };
    t.publish(due(Duration::from_millis(500)));
    t.publish(due(Duration::from_secs(3600)));
    let h = Scripted::default();
    let start = tokio::time::Instant::now();
    let worker = Worker::builder(Arc::new(t.clone()), h.clone())
        .clock(Arc::new(clock))
        .build()
        .unwrap();
    let idle = t.clone();
    worker.run(async move { idle.idle().await }).await.unwrap();
    let order = h.order.lock().unwrap().clone();
    assert_eq!(order, ["forged", "early"], "the forged due time is ignored");
    assert!(start.elapsed() >= Duration::from_millis(500));
    assert!(start.elapsed() < Duration::from_secs(2));
}
