//! Lifecycle scenarios: success, retries, parking, budgets, discards,
//! duplicates, poison floods and hostile headers.

use std::time::Duration;

use parkway::{Backoff, FailureClass, Message, RetryPolicy};

use super::harness::{Broker, WITHIN, eventually, finish, settle_down, start};

const DELAY: Duration = Duration::from_millis(200);

fn policy() -> parkway::RetryPolicyBuilder {
    RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::fixed(DELAY))
        .park_on(["PARK_ME"])
        .discard_on(["STALE"])
}

pub async fn success_is_acked_once(b: &dyn Broker) {
    let p = policy().build().unwrap();
    let q = b.queue(&p).await;
    q.publish("m1", "ok").await;
    let w = start(&q, p);
    eventually(WITHIN, "m1 handled", || async {
        w.record.succeeded("m1") == 1
    })
    .await;
    settle_down().await;
    assert_eq!(w.record.run_count("m1"), 1, "delivered once");
    assert!(q.parked().await.is_empty(), "nothing parked");
    let s = finish(w, &q).await;
    assert_eq!((s.acked, s.retried, s.parked), (1, 0, 0));
}

pub async fn transient_three_times_then_success(b: &dyn Broker) {
    let p = policy().max_attempts(5).build().unwrap();
    let q = b.queue(&p).await;
    let tolerance = tolerance(&q);
    q.publish("m1", "fail:3").await;
    let w = start(&q, p);
    eventually(WITHIN, "m1 succeeds", || async {
        w.record.succeeded("m1") == 1
    })
    .await;
    let runs = w.record.runs("m1");
    assert_eq!(runs.len(), 4, "3 failures + 1 success");
    for pair in runs.windows(2) {
        let waited = pair[1].at - pair[0].at;
        assert!(
            // Due times travel with millisecond precision.
            waited + Duration::from_millis(2) >= DELAY && waited <= DELAY + tolerance,
            "waited {waited:?}, policy says {DELAY:?} (+{tolerance:?})"
        );
    }
    assert!(q.parked().await.is_empty());
    finish(w, &q).await;
}

pub async fn permanent_reason_parks_on_attempt_one(b: &dyn Broker) {
    let p = policy().build().unwrap();
    let q = b.queue(&p).await;
    q.publish_msg(
        Message::new("conformance", "bad:PARK_ME")
            .with_id("m1")
            .with_correlation_id("corr-1")
            .with_type("CreateOrder")
            .with_header("tenant", "acme"),
    )
    .await;
    let w = start(&q, p);
    eventually(WITHIN, "m1 parked", || async {
        q.parked().await.len() == 1
    })
    .await;
    settle_down().await;
    assert_eq!(w.record.run_count("m1"), 1, "not retried");
    let parked = q.parked().await.remove(0);
    assert_eq!(
        parked.message.body, "bad:PARK_ME",
        "body kept byte for byte"
    );
    assert_eq!(parked.message.headers.get("tenant"), Some("acme"));
    let e = parked.envelope;
    assert_eq!(e.attempts, 1);
    assert_eq!(e.reason.as_ref().map(|r| r.as_str()), Some("PARK_ME"));
    assert_eq!(e.class, Some(FailureClass::PermanentTechnical));
    assert_eq!(e.message_id.as_deref(), Some("m1"));
    assert_eq!(e.correlation_id.as_deref(), Some("corr-1"));
    assert_eq!(e.message_type.as_deref(), Some("CreateOrder"));
    assert!(e.origin.queue.is_some(), "origin recorded");
    assert!(e.first_failure_at.is_some() && e.first_failure_at == e.last_failure_at);
    assert!(
        e.last_error
            .unwrap_or_default()
            .contains("scripted permanent failure")
    );
    finish(w, &q).await;
}

pub async fn transient_forever_parks_after_max_attempts(b: &dyn Broker) {
    let p = policy().build().unwrap();
    let q = b.queue(&p).await;
    q.publish("m1", "forever").await;
    let w = start(&q, p);
    eventually(WITHIN, "m1 parked", || async {
        q.parked().await.len() == 1
    })
    .await;
    settle_down().await;
    assert_eq!(w.record.run_count("m1"), 4, "max_attempts = 4");
    let e = q.parked().await.remove(0).envelope;
    assert_eq!(e.attempts, 4);
    assert_eq!(e.class, Some(FailureClass::Transient));
    let (first, last) = (e.first_failure_at.unwrap(), e.last_failure_at.unwrap());
    assert!(
        last.duration_since(first).unwrap() >= DELAY * 3,
        "{first:?} .. {last:?}"
    );
    assert!(e.last_error.unwrap_or_default().contains("503"));
    assert!(e.total_delay >= DELAY * 3);
    finish(w, &q).await;
}

pub async fn max_age_parks_with_attempts_left(b: &dyn Broker) {
    let p = policy()
        .max_attempts(1000)
        .max_age(Duration::from_millis(700))
        .build()
        .unwrap();
    let q = b.queue(&p).await;
    q.publish("m1", "forever").await;
    let w = start(&q, p);
    eventually(WITHIN, "m1 parked", || async {
        q.parked().await.len() == 1
    })
    .await;
    let runs = w.record.run_count("m1");
    assert!((2..1000).contains(&runs), "parked by age after {runs} runs");
    finish(w, &q).await;
}

pub async fn discard_and_duplicate_are_acked_not_parked(b: &dyn Broker) {
    let p = policy().build().unwrap();
    let q = b.queue(&p).await;
    q.publish("stale", "discard").await;
    q.publish("dup", "dup").await;
    q.publish("ok", "ok").await;
    let w = start(&q, p);
    eventually(WITHIN, "ok handled", || async {
        w.record.succeeded("ok") == 1
    })
    .await;
    eventually(WITHIN, "stale and dup seen", || async {
        w.record.run_count("stale") == 1 && w.record.run_count("dup") == 1
    })
    .await;
    settle_down().await;
    assert_eq!(w.record.run_count("stale"), 1, "discarded, not retried");
    assert_eq!(w.record.run_count("dup"), 1, "duplicate, not retried");
    assert!(q.parked().await.is_empty());
    let s = finish(w, &q).await;
    assert_eq!((s.discarded, s.duplicates, s.acked), (1, 1, 1));
}

pub async fn poison_flood_does_not_starve_healthy_messages(b: &dyn Broker) {
    let p = policy().build().unwrap();
    let q = b.queue(&p).await;
    for i in 0..300 {
        q.publish(&format!("poison-{i}"), "bad:PARK_ME").await;
        if i % 6 == 0 {
            q.publish(&format!("healthy-{i}"), "ok").await;
        }
    }
    let w = start(&q, p);
    eventually(
        WITHIN * 3,
        "all healthy handled and all poison parked",
        || async {
            (0..300)
                .step_by(6)
                .all(|i| w.record.succeeded(&format!("healthy-{i}")) == 1)
                && q.parked().await.len() == 300
        },
    )
    .await;
    finish(w, &q).await;
}

pub async fn garbage_headers_never_crash_or_buy_retries(b: &dyn Broker) {
    let p = policy().build().unwrap();
    let q = b.queue(&p).await;
    let garbage = [
        ("x-parkway-attempt", "-5"),
        ("x-parkway-first-failure-at", "yesterday"),
        ("x-parkway-total-delay-ms", "99999999999999999999999"),
        ("x-parkway-class", "permanent-ish"),
        ("x-parkway-reason", "spaces are not allowed"),
        ("x-parkway-origin-partition", "NaN"),
    ];
    let mut m = Message::new("conformance", "forever").with_id("garbage");
    for (k, v) in garbage {
        m = m.with_header(k, v);
    }
    q.publish_msg(m).await;
    q.publish_msg(
        Message::new("conformance", "forever")
            .with_id("forged")
            .with_header("x-parkway-attempt", "0")
            .with_header("x-parkway-first-failure-at", "2199-01-01T00:00:00Z"),
    )
    .await;
    let w = start(&q, p);
    eventually(WITHIN, "both parked", || async {
        q.parked().await.len() == 2
    })
    .await;
    settle_down().await;
    for id in ["garbage", "forged"] {
        assert_eq!(
            w.record.run_count(id),
            4,
            "{id}: budget is max_attempts = 4"
        );
    }
    finish(w, &q).await;
}

/// Delay tolerance for this broker: its granularity plus scheduling slack.
fn tolerance(q: &super::Queue) -> Duration {
    // Generous: the suites run their scenarios in parallel on a loaded
    // 2-core machine beside the broker (a 490 ms stall was seen once). The
    // lower bound is the rule; precision is measured in the benchmarks.
    let slack = Duration::from_secs(1);
    match q.transport.capabilities().delay_mode {
        parkway::DelayMode::Exact { granularity } => granularity + slack,
        parkway::DelayMode::Tiered { max_error_percent } => DELAY * max_error_percent / 100 + slack,
        _ => slack,
    }
}
