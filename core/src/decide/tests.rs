use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;

use super::*;
use crate::backoff::{Backoff, Jitter, Strategy as Shape};

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_780_000_000)
}
fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
fn transient() -> Classified {
    Classified::new(FailureClass::Transient, "DOWNSTREAM_TIMEOUT")
}
fn state(attempts: u32) -> RetryState {
    RetryState {
        attempts,
        first_failure_at: (attempts > 0).then(now),
        ..RetryState::default()
    }
}
fn policy() -> crate::policy::RetryPolicyBuilder {
    RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::fixed(secs(2)))
}

#[test]
fn duplicate_is_acked() {
    let f = Classified::new(FailureClass::Duplicate, "ALREADY_APPLIED");
    let p = policy().build().unwrap();
    assert_eq!(decide(&p, &state(0), &f, now(), 0), Decision::Ack);
}

#[test]
fn discard_on_wins_over_everything_but_duplicates() {
    let p = policy().discard_on(["STALE_EVENT"]).build().unwrap();
    let f = Classified::new(FailureClass::PermanentBusiness, "STALE_EVENT");
    assert_eq!(
        decide(&p, &state(0), &f, now(), 0),
        Decision::Discard("STALE_EVENT".into())
    );
}

#[test]
fn park_on_parks_at_first_failure_whatever_the_class() {
    let p = policy()
        .park_on(["DESERIALIZATION_FAILED"])
        .build()
        .unwrap();
    let f = Classified::new(FailureClass::Transient, "DESERIALIZATION_FAILED");
    assert_eq!(
        decide(&p, &state(0), &f, now(), 0),
        Decision::Park("DESERIALIZATION_FAILED".into())
    );
}

#[test]
fn permanent_classes_park_at_first_failure() {
    let p = policy().build().unwrap();
    for class in [
        FailureClass::PermanentBusiness,
        FailureClass::PermanentTechnical,
    ] {
        let f = Classified::new(class, "NOPE");
        assert_eq!(
            decide(&p, &state(0), &f, now(), 0),
            Decision::Park("NOPE".into())
        );
    }
}

#[test]
fn transient_retries_later_with_the_backoff() {
    let p = policy().build().unwrap();
    assert_eq!(
        decide(&p, &state(0), &transient(), now(), 0),
        Decision::RetryLater(secs(2))
    );
}

#[test]
fn unknown_and_contention_are_retried() {
    let p = policy().build().unwrap();
    for class in [FailureClass::Unknown, FailureClass::Contention] {
        let f = Classified::new(class, "X");
        assert_eq!(
            decide(&p, &state(1), &f, now(), 0),
            Decision::RetryLater(secs(2))
        );
    }
}

#[test]
fn max_attempts_spent_follows_on_exhausted() {
    // max_attempts 4: failures of attempts 1..=3 retry, the 4th parks.
    let p = policy().build().unwrap();
    assert!(matches!(
        decide(&p, &state(2), &transient(), now(), 0),
        Decision::RetryLater(_)
    ));
    assert_eq!(
        decide(&p, &state(3), &transient(), now(), 0),
        Decision::Park("DOWNSTREAM_TIMEOUT".into())
    );
    let p = policy().on_exhausted(OnExhausted::Discard).build().unwrap();
    assert!(matches!(
        decide(&p, &state(3), &transient(), now(), 0),
        Decision::Discard(_)
    ));
    let p = policy().on_exhausted(OnExhausted::Halt).build().unwrap();
    assert!(matches!(
        decide(&p, &state(3), &transient(), now(), 0),
        Decision::Halt(_)
    ));
}

#[test]
fn max_age_spent_parks_with_attempts_left() {
    let p = policy()
        .max_attempts(100)
        .max_age(secs(60))
        .build()
        .unwrap();
    let s = RetryState {
        attempts: 1,
        first_failure_at: Some(now() - secs(61)),
        ..RetryState::default()
    };
    assert!(matches!(
        decide(&p, &s, &transient(), now(), 0),
        Decision::Park(_)
    ));
    let s = RetryState {
        first_failure_at: Some(now() - secs(59)),
        ..s
    };
    assert!(matches!(
        decide(&p, &s, &transient(), now(), 0),
        Decision::RetryLater(_)
    ));
}

#[test]
fn local_attempts_come_before_broker_retries() {
    let p = policy()
        .local_attempts(3)
        .local_backoff(Backoff::fixed(Duration::from_millis(50)))
        .build()
        .unwrap();
    let mut s = state(0);
    assert_eq!(
        decide(&p, &s, &transient(), now(), 0),
        Decision::RetryLocal(Duration::from_millis(50))
    );
    s.local_attempt = 3;
    assert_eq!(
        decide(&p, &s, &transient(), now(), 0),
        Decision::RetryLater(secs(2))
    );
}

#[test]
fn total_delay_is_clamped_then_spent() {
    let p = policy()
        .max_attempts(100)
        .max_total_delay(secs(5))
        .build()
        .unwrap();
    let mut s = state(2);
    s.total_delay = secs(4);
    assert_eq!(
        decide(&p, &s, &transient(), now(), 0),
        Decision::RetryLater(secs(1))
    );
    s.total_delay = secs(5);
    assert!(matches!(
        decide(&p, &s, &transient(), now(), 0),
        Decision::Park(_)
    ));
}

#[test]
fn ordered_mode_pauses_in_place() {
    let p = policy().ordering(Ordering::Ordered).build().unwrap();
    assert_eq!(
        decide(&p, &state(0), &transient(), now(), 0),
        Decision::Pause(secs(2))
    );
}

#[test]
fn a_forged_first_failure_in_the_far_past_only_shortens_the_budget() {
    let p = policy().max_age(secs(60)).build().unwrap();
    let s = RetryState {
        first_failure_at: Some(UNIX_EPOCH),
        ..RetryState::default()
    };
    assert!(matches!(
        decide(&p, &s, &transient(), now(), 0),
        Decision::Park(_)
    ));
}

fn arb_policy() -> impl proptest::strategy::Strategy<Value = RetryPolicy> {
    (
        1u32..20,
        1u32..4,
        proptest::option::of(1u64..100_000),
        proptest::option::of(1u64..100_000),
        crate::backoff::tests::arb_backoff(),
        any::<bool>(),
    )
        .prop_map(|(max, local, age, total, backoff, ordered)| {
            let mut b = RetryPolicy::builder()
                .max_attempts(max)
                .local_attempts(local)
                .backoff(backoff)
                .park_on(["PERMANENT_REASON"]);
            if let Some(a) = age {
                b = b.max_age(secs(a));
            }
            if let Some(t) = total {
                b = b.max_total_delay(secs(t));
            }
            if ordered {
                b = b.ordering(Ordering::Ordered);
            }
            b.build()
        })
        .prop_filter_map("valid", Result::ok)
}

proptest! {
    /// Drives one message through repeated failures, as a worker would, and
    /// checks the budget is never exceeded in attempts or total delay.
    #[test]
    fn attempts_and_delays_never_exceed_the_budget(
        p in arb_policy(),
        rolls in proptest::collection::vec(any::<u64>(), 64),
        class in proptest::sample::select(vec![
            FailureClass::Transient, FailureClass::Contention, FailureClass::Unknown,
        ]),
    ) {
        let f = Classified::new(class, "DOWNSTREAM_TIMEOUT");
        let mut s = RetryState::default();
        let mut t = now();
        let mut handler_runs = 0u32;
        let mut broker_attempts = 1u32;
        for roll in rolls.iter().cycle().take(10_000) {
            handler_runs += 1;
            match decide(&p, &s, &f, t, *roll) {
                Decision::RetryLocal(d) => {
                    prop_assert!(s.local_attempt < p.local_attempts());
                    s.local_attempt += 1;
                    t += d;
                }
                Decision::RetryLater(d) | Decision::Pause(d) => {
                    if s.first_failure_at.is_none() { s.first_failure_at = Some(t); }
                    s = s.after_wait(t, d);
                    broker_attempts += 1;
                    t += d;
                }
                Decision::Park(_) => break,
                other => prop_assert!(false, "unexpected {other:?}"),
            }
        }
        prop_assert!(broker_attempts <= p.max_attempts());
        prop_assert!(handler_runs <= p.max_attempts() * p.local_attempts());
        if let Some(max) = p.max_total_delay() {
            prop_assert!(s.total_delay <= max, "{:?} > {max:?}", s.total_delay);
        }
    }

    #[test]
    fn permanent_reasons_park_on_the_first_failure(
        p in arb_policy(),
        attempts in 0u32..5,
        local in 1u32..4,
        permanent_class in any::<bool>(),
        roll in any::<u64>(),
    ) {
        let f = if permanent_class {
            Classified::new(FailureClass::PermanentBusiness, "ANY_REASON")
        } else {
            Classified::new(FailureClass::Transient, "PERMANENT_REASON")
        };
        let s = RetryState { attempts, local_attempt: local, ..RetryState::default() };
        prop_assert!(matches!(decide(&p, &s, &f, now(), roll), Decision::Park(_)));
    }

    #[test]
    fn forged_attempt_counts_never_buy_retries(
        p in arb_policy(),
        header in 0u32..50,
        broker in 0u32..50,
    ) {
        use crate::envelope::Envelope;
        let env = Envelope { attempts: header, ..Envelope::default() };
        let s = env.retry_state(Some(broker), now());
        let s = RetryState { local_attempt: p.local_attempts(), ..s };
        let d = decide(&p, &s, &transient(), now(), 0);
        if broker + 1 >= p.max_attempts() {
            prop_assert!(matches!(d, Decision::Park(_)), "{d:?}");
        }
    }
}

#[test]
fn jitter_roll_changes_only_the_delay() {
    let b = Backoff::new(
        Shape::Exponential {
            initial: secs(1),
            multiplier: 2.0,
        },
        Jitter::Full,
        Some(secs(60)),
    )
    .unwrap();
    let p = policy().backoff(b).build().unwrap();
    let lo = decide(&p, &state(1), &transient(), now(), 0);
    let hi = decide(&p, &state(1), &transient(), now(), u64::MAX);
    assert_eq!(lo, Decision::RetryLater(Duration::ZERO));
    assert_eq!(hi, Decision::RetryLater(secs(2)));
}
