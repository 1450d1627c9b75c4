//! Redrive over the in-memory lot: selection, dry run, limit, rate, canary.

use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::{
    Envelope, EnvelopeLimits, Headers, Message, Settle, Transport, memory::MemoryTransport,
};

async fn lot_with(reasons: &[&'static str]) -> MemoryTransport {
    let t = MemoryTransport::new("orders");
    for (i, r) in reasons.iter().enumerate() {
        t.publish(Message::new("orders", format!("body-{i}")).with_id(format!("m{i}")));
        let d = t.receive().await.unwrap().unwrap();
        let env = Envelope {
            attempts: 5,
            reason: Some((*r).into()),
            ..Envelope::default()
        };
        let mut headers = Headers::new();
        env.encode(&mut headers, &EnvelopeLimits::default());
        t.settle(d, Settle::Park { headers }).await.unwrap();
    }
    t
}

fn replay() -> ReplayRequest {
    ReplayRequest::new("alice", "fixed the parser")
        .unwrap()
        .with_id("replay-test")
}

async fn run(t: &MemoryTransport, f: &Filter, o: &RedriveOptions) -> RedriveReport {
    redrive(t.parking_lot(), f, o, &replay(), &EnvelopeLimits::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn moves_only_matches_with_replay_headers_and_keeps_the_rest_in_order() {
    let t = lot_with(&["A", "B", "A", "C", "B"]).await;
    let r = run(
        &t,
        &Filter::default().reason("B"),
        &RedriveOptions::default(),
    )
    .await;
    assert_eq!((r.matched, r.moved, r.left, r.failed), (2, 2, 0, 0));
    let rest: Vec<_> = t
        .parking_lot()
        .browse(10)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.message.id.unwrap())
        .collect();
    assert_eq!(rest, ["m0", "m2", "m3"]);
    let back = t.receive().await.unwrap().unwrap();
    assert_eq!(back.message.id.as_deref(), Some("m1"));
    assert_eq!(back.message.body, "body-1");
    let env = Envelope::decode(&back.message.headers);
    assert_eq!(env.attempts, 0, "a replay gets a fresh budget");
    let rp = env.replay.unwrap();
    assert_eq!(
        (rp.id.as_str(), rp.by.as_str(), rp.original_attempts),
        ("replay-test", "alice", 5)
    );
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let t = lot_with(&["A", "B", "A"]).await;
    let o = RedriveOptions::default().dry_run(true);
    let r = run(&t, &Filter::default().reason("A"), &o).await;
    assert_eq!((r.matched, r.moved, r.left), (2, 0, 2));
    assert_eq!(t.parked_len(), 3);
    assert_eq!(t.ready_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn limit_and_rate_are_honoured() {
    let t = lot_with(&["A"; 6]).await;
    let o = RedriveOptions::default().limit(4).rate(2.0).unwrap();
    let start = Instant::now();
    let r = run(&t, &Filter::default(), &o).await;
    assert_eq!((r.matched, r.moved, r.left), (6, 4, 2));
    // Four moves at 2/s: the first at once, the last 1.5 s later.
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
    assert_eq!(t.parked_len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failing_canary_aborts_the_rest() {
    let t = lot_with(&["A"; 5]).await;
    // A consumer that fails every replayed message again.
    let consumer = {
        let t = t.clone();
        tokio::spawn(async move {
            while let Ok(Some(d)) = t.receive().await {
                let mut headers = d.message.headers.clone();
                let mut env = Envelope::decode(&headers);
                env.attempts = 1;
                env.encode(&mut headers, &EnvelopeLimits::default());
                t.settle(d, Settle::Park { headers }).await.unwrap();
            }
        })
    };
    let canary = Canary::new(2, Duration::from_secs(10), 50.0).unwrap();
    let r = run(
        &t,
        &Filter::default(),
        &RedriveOptions::default().canary(canary),
    )
    .await;
    t.close();
    consumer.await.unwrap();
    assert_eq!(r.moved, 2);
    assert_eq!(r.failed_again, 2);
    assert!(r.aborted.as_deref().unwrap_or("").contains("canary"), "{r}");
    assert_eq!(r.left, 3, "the three never tried stay parked: {r}");
    assert_eq!(t.parked_len(), 5);
}

#[tokio::test(start_paused = true)]
async fn a_healthy_canary_lets_the_rest_through() {
    let t = lot_with(&["A"; 5]).await;
    let canary = Canary::new(2, Duration::from_secs(1), 0.0).unwrap();
    let r = run(
        &t,
        &Filter::default(),
        &RedriveOptions::default().canary(canary).limit(4),
    )
    .await;
    assert_eq!((r.moved, r.failed_again, r.left), (4, 0, 1), "{r}");
    assert!(r.is_clean());
}

#[tokio::test]
async fn failed_moves_are_counted_and_stay_parked() {
    let t = lot_with(&["A", "A"]).await;
    t.fail_next(1);
    let r = run(&t, &Filter::default(), &RedriveOptions::default()).await;
    assert_eq!((r.moved, r.failed, r.left), (1, 1, 1));
    assert_eq!(t.parked_len(), 1);
}

#[test]
fn bad_options_are_refused() {
    assert!(RedriveOptions::default().rate(f64::NAN).is_err());
    assert!(Canary::new(0, Duration::ZERO, 10.0).is_err());
    assert!(Canary::new(1, Duration::ZERO, 101.0).is_err());
    assert!(ReplayRequest::new(" ", "why").is_err());
    assert!(ReplayRequest::new("me", "").is_err());
}
