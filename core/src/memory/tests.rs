use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::{Envelope, EnvelopeLimits, Headers};

fn parked_headers(reason: &'static str) -> Headers {
    let env = Envelope {
        attempts: 2,
        reason: Some(reason.into()),
        ..Envelope::default()
    };
    let mut h = Headers::new();
    env.encode(&mut h, &EnvelopeLimits::default());
    h
}

#[tokio::test(start_paused = true)]
async fn retry_copies_arrive_after_their_delay() {
    let t = MemoryTransport::new("q");
    t.publish(Message::new("q", "x"));
    let d = t.receive().await.unwrap().unwrap();
    assert_eq!(d.broker_attempts, Some(0));
    let start = Instant::now();
    let headers = parked_headers("R");
    t.settle(
        d,
        Settle::Retry {
            delay: Duration::from_secs(5),
            headers: headers.clone(),
        },
    )
    .await
    .unwrap();
    assert_eq!(t.ready_len(), 0);
    let d = t.receive().await.unwrap().unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(d.message.headers, headers);
    assert_eq!(d.broker_attempts, Some(1), "the broker counts redeliveries");
}

#[tokio::test]
async fn released_deliveries_go_back_to_the_head_uncounted() {
    let t = MemoryTransport::new("q");
    t.publish(Message::new("q", "1").with_id("1"));
    t.publish(Message::new("q", "2").with_id("2"));
    let d = t.receive().await.unwrap().unwrap();
    t.settle(d, Settle::Release).await.unwrap();
    let d = t.receive().await.unwrap().unwrap();
    assert_eq!(d.message.id.as_deref(), Some("1"));
    assert_eq!(d.broker_attempts, Some(0));
}

#[tokio::test]
async fn deliveries_from_elsewhere_are_refused_and_handed_back() {
    let a = MemoryTransport::new("a");
    let b = MemoryTransport::new("b");
    a.publish(Message::new("a", "x"));
    let d = a.receive().await.unwrap().unwrap();
    let back = b.settle(d, Settle::Ack).await.unwrap_err();
    assert_eq!(back.error.kind(), ErrorKind::Config);
    a.settle(back.delivery, Settle::Ack).await.unwrap();
    assert_eq!(a.stats().acked, 1);
}

#[tokio::test]
async fn close_ends_receive() {
    let t = MemoryTransport::new("q");
    let waiting = {
        let t = t.clone();
        tokio::spawn(async move { t.receive().await })
    };
    tokio::task::yield_now().await;
    t.close();
    assert!(waiting.await.unwrap().unwrap().is_none());
}

#[tokio::test]
async fn browse_does_not_consume_or_reorder() {
    let t = MemoryTransport::new("q");
    for r in ["A", "B", "C"] {
        t.publish(Message::new("q", r));
        let d = t.receive().await.unwrap().unwrap();
        t.settle(
            d,
            Settle::Park {
                headers: parked_headers(r),
            },
        )
        .await
        .unwrap();
    }
    let first = t.parking_lot().browse(10).await.unwrap();
    let again = t.parking_lot().browse(2).await.unwrap();
    let reasons = |v: &[crate::Parked]| -> Vec<String> {
        v.iter()
            .map(|p| p.envelope.reason.as_ref().unwrap().to_string())
            .collect()
    };
    assert_eq!(reasons(&first), ["A", "B", "C"]);
    assert_eq!(reasons(&again), ["A", "B"]);
    assert_eq!(t.parked_len(), 3);
}
