use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;

use super::*;
use crate::failure::{Classified, FailureClass, Reason};

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn sample() -> Envelope {
    Envelope {
        attempts: 3,
        first_failure_at: Some(at(1_780_000_000)),
        last_failure_at: Some(at(1_780_000_100)),
        total_delay: Duration::from_millis(7_000),
        last_delay: Some(Duration::from_millis(4_000)),
        due_at: Some(at(1_780_000_104)),
        class: Some(FailureClass::Transient),
        reason: Some(Reason::from_static("DOWNSTREAM_TIMEOUT")),
        last_error: Some("DOWNSTREAM_TIMEOUT: read timed out".into()),
        origin: Origin {
            queue: Some("orders".into()),
            partition: Some(2),
            offset: Some(41),
        },
        message_id: Some("m-1".into()),
        correlation_id: Some("c-1".into()),
        message_type: Some("CreateOrder".into()),
        handler_version: Some("1.4.0".into()),
        replay: Some(Replay {
            id: "replay-1".into(),
            by: "ops".into(),
            reason: "FIXED".into(),
            original_attempts: 6,
        }),
    }
}

#[test]
fn round_trips_every_field() {
    let env = sample();
    let mut h = Headers::new();
    h.insert("content-type", "application/json");
    env.encode(&mut h, &EnvelopeLimits::default());
    assert_eq!(h.get("content-type"), Some("application/json"));
    assert_eq!(Envelope::decode(&h), env);
}

#[test]
fn garbage_values_are_absent() {
    let h: Headers = [
        (names::ATTEMPT, "-3"),
        (names::FIRST_FAILURE_AT, "yesterday"),
        (names::LAST_FAILURE_AT, "1900-01-01T00:00:00Z"),
        (names::TOTAL_DELAY_MS, "99999999999999999999999"),
        (names::CLASS, "fatal"),
        (names::REASON, "has spaces"),
        (names::ORIGIN_PARTITION, "-1"),
        (names::ORIGIN_OFFSET, "0x10"),
        (names::MESSAGE_ID, ""),
    ]
    .into_iter()
    .collect();
    assert_eq!(Envelope::decode(&h), Envelope::default());
}

#[test]
fn absurd_attempts_are_not_believed() {
    let h: Headers = [(names::ATTEMPT, "4000000000")].into_iter().collect();
    assert_eq!(Envelope::decode(&h).attempts, 0);
}

#[test]
fn broker_count_wins_over_a_forged_low_header() {
    let env = Envelope {
        attempts: 0,
        ..sample()
    };
    let now = at(1_780_000_200);
    assert_eq!(env.retry_state(Some(7), now).attempts, 7);
    assert_eq!(env.retry_state(None, now).attempts, 0);
    let env = Envelope {
        attempts: 9,
        ..sample()
    };
    assert_eq!(env.retry_state(Some(2), now).attempts, 9);
}

#[test]
fn future_first_failure_is_clamped_to_now() {
    let env = Envelope {
        first_failure_at: Some(at(2_000_000_000)),
        ..sample()
    };
    let now = at(1_780_000_200);
    assert_eq!(env.retry_state(None, now).first_failure_at, Some(now));
}

#[test]
fn last_error_is_cut_to_its_budget() {
    let env = Envelope {
        last_error: Some("é".repeat(5_000)),
        ..sample()
    };
    let mut h = Headers::new();
    env.encode(&mut h, &EnvelopeLimits::default());
    let e = h.get(names::LAST_ERROR).unwrap_or_default();
    assert!(e.len() <= 1024 && e.len() >= 1000, "{}", e.len());
}

#[test]
fn record_failure_counts_on_the_reconciled_state() {
    let mut env = Envelope::default();
    let now = at(1_780_000_000);
    let state = env.retry_state(Some(4), now);
    let f = Classified::new(FailureClass::Transient, "X");
    env.record_failure(&state, &f, "boom", now, Some(Duration::from_secs(2)));
    assert_eq!(env.attempts, 5);
    assert_eq!(env.first_failure_at, Some(now));
    assert_eq!(env.total_delay, Duration::from_secs(2));
    assert_eq!(env.due_at, Some(now + Duration::from_secs(2)));
}

#[test]
fn replay_resets_the_budget_and_keeps_history() {
    let env = sample().into_replay("r-2", "alice", "FIXED_AGAIN");
    assert_eq!(env.attempts, 0);
    assert_eq!(env.first_failure_at, None);
    assert_eq!(env.replay.map(|r| r.original_attempts), Some(9));
}

fn arb_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(".{0,300}")
}

prop_compose! {
    fn arb_envelope()(
        attempts in 0u32..100_000,
        first in proptest::option::of(946_684_800u64..7_258_118_399),
        delay_ms in 0u64..10_000_000,
        class in proptest::option::of(proptest::sample::select(FailureClass::ALL.to_vec())),
        reason in proptest::option::of("[A-Z_]{1,64}"),
        error in proptest::option::of(".{0,3000}"),
        ids in (arb_text(), arb_text(), arb_text(), arb_text(), arb_text()),
        partition in proptest::option::of(0i32..10_000),
        replay in proptest::option::of((".{1,200}", ".{0,200}", ".{0,200}", 0u32..1000)),
    ) -> Envelope {
        Envelope {
            attempts,
            first_failure_at: first.map(at),
            last_failure_at: first.map(at),
            total_delay: Duration::from_millis(delay_ms),
            last_delay: Some(Duration::from_millis(delay_ms / 2)),
            due_at: first.map(at),
            class,
            reason: reason.and_then(|r| Reason::parse(&r).ok()),
            last_error: error,
            origin: Origin { queue: ids.0, partition, offset: Some(7) },
            message_id: ids.1,
            correlation_id: ids.2,
            message_type: ids.3,
            handler_version: ids.4,
            replay: replay.map(|(id, by, reason, n)| Replay { id, by, reason, original_attempts: n }),
        }
    }
}

proptest! {
    #[test]
    fn encoded_envelope_never_exceeds_its_budget(
        env in arb_envelope(),
        max in MIN_ENVELOPE_BYTES..6000,
        err in 0usize..2000,
    ) {
        let limits = EnvelopeLimits::new(max, err.min(max)).unwrap();
        let mut h = Headers::new();
        env.encode(&mut h, &limits);
        prop_assert!(h.byte_size(HEADER_PREFIX) <= max);
        // The fields the rules need always survive.
        let back = Envelope::decode(&h);
        prop_assert_eq!(back.attempts, env.attempts);
        prop_assert_eq!(back.first_failure_at.is_some(), env.first_failure_at.is_some());
        prop_assert_eq!(back.class, env.class);
        prop_assert_eq!(back.reason, env.reason);
        prop_assert_eq!(back.total_delay, env.total_delay);
    }

    #[test]
    fn one_encode_normalises_for_good(
        pairs in proptest::collection::vec(
            (proptest::sample::select(vec![
                names::MESSAGE_ID, names::CORRELATION_ID, names::MESSAGE_TYPE,
                names::ORIGIN_QUEUE, names::REPLAY_ID, names::REPLAYED_BY,
                names::LAST_ERROR, names::ATTEMPT, names::REASON,
            ]), "\\PC{0,40}[\\x00-\\x1f ]{0,3}"),
            0..10,
        ),
    ) {
        let limits = EnvelopeLimits::default();
        let once = Envelope::decode(&pairs.into_iter().collect());
        let mut h = Headers::new();
        once.encode(&mut h, &limits);
        let twice = Envelope::decode(&h);
        let mut h2 = Headers::new();
        twice.encode(&mut h2, &limits);
        prop_assert_eq!(&h, &h2);
        prop_assert_eq!(once.message_id, twice.message_id);
        prop_assert_eq!(once.message_type, twice.message_type);
    }

    #[test]
    fn decode_never_panics_on_garbage(
        pairs in proptest::collection::vec(
            (proptest::sample::select(vec![
                names::ATTEMPT, names::FIRST_FAILURE_AT, names::LAST_FAILURE_AT,
                names::TOTAL_DELAY_MS, names::LAST_DELAY_MS, names::CLASS, names::REASON,
                names::ORIGIN_PARTITION, names::ORIGIN_OFFSET, names::REPLAY_ID,
                names::ORIGINAL_ATTEMPTS, names::LAST_ERROR, "x-parkway-unknown",
            ]), ".{0,64}"),
            0..16,
        ),
        broker in proptest::option::of(any::<u32>()),
    ) {
        let h: Headers = pairs.into_iter().collect();
        let env = Envelope::decode(&h);
        let state = env.retry_state(broker, at(1_780_000_000));
        prop_assert!(state.attempts >= broker.unwrap_or(0));
        // Whatever was decoded encodes within budget again.
        let mut out = Headers::new();
        env.encode(&mut out, &EnvelopeLimits::default());
        prop_assert!(out.byte_size(HEADER_PREFIX) <= EnvelopeLimits::default().max_bytes());
    }
}

proptest! {
    /// The ordered lookup behind `decode`'s fast path agrees with a scan,
    /// names just before and after the prefix included.
    #[test]
    fn prefix_lookup_agrees_with_a_scan(
        names in proptest::collection::vec("(x-parkway-|x-parkwa|x-parkway|x-parkwaz|y|)[a-z-]{0,6}", 0..8),
        prefix in "(x-parkway-|x-park|y|)",
    ) {
        let h: Headers = names.iter().map(|n| (n.as_str(), "v")).collect();
        prop_assert_eq!(h.has_prefix(&prefix), names.iter().any(|n| n.starts_with(&prefix)));
    }
}
