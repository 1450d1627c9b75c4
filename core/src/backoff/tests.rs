use std::{sync::Arc, time::Duration};

use proptest::prelude::*;

use super::{Backoff, Jitter, SeededDice, Strategy as Shape};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn arb_strategy() -> impl Strategy<Value = Shape> {
    let d = (0u64..120_000).prop_map(ms);
    let pos = (1u64..120_000).prop_map(ms);
    prop_oneof![
        d.clone().prop_map(Shape::Fixed),
        (d.clone(), d.clone()).prop_map(|(initial, step)| Shape::Linear { initial, step }),
        (pos.clone(), 1.0f64..10.0).prop_map(|(initial, multiplier)| {
            Shape::Exponential {
                initial,
                multiplier,
            }
        }),
        pos.prop_map(|initial| Shape::Fibonacci { initial }),
        proptest::collection::vec(d, 1..6).prop_map(|v| Shape::Schedule(Arc::from(v))),
    ]
}

pub(crate) fn arb_jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        Just(Jitter::Decorrelated),
        (0.01f64..=1.0).prop_map(Jitter::Proportional),
    ]
}

pub(crate) fn arb_backoff() -> impl Strategy<Value = Backoff> {
    (
        arb_strategy(),
        arb_jitter(),
        (1u64..3_600_000).prop_map(ms),
        any::<bool>(),
    )
        .prop_map(|(s, j, cap, capped)| {
            let max = (capped || j == Jitter::Decorrelated).then_some(cap);
            Backoff::new(s, j, max)
        })
        .prop_filter_map("valid backoffs only", Result::ok)
}

proptest! {
    #[test]
    fn every_delay_is_within_its_bounds_and_the_cap(
        b in arb_backoff(),
        attempt in 0u32..200,
        previous in proptest::option::of((0u64..10_000_000).prop_map(ms)),
        roll in any::<u64>(),
    ) {
        let d = b.delay(attempt, previous, roll);
        let (lo, hi) = b.bounds(attempt, previous);
        prop_assert!(lo <= d && d <= hi, "{d:?} not in [{lo:?}, {hi:?}]");
        prop_assert!(d <= b.cap(), "{d:?} above cap {:?}", b.cap());
    }

    #[test]
    fn longest_covers_every_delay_of_the_budget(
        b in arb_backoff(),
        attempts in 1u32..30,
        seed in any::<u64>(),
    ) {
        let dice = SeededDice::new(seed);
        let longest = b.longest(attempts);
        for d in b.delays(&dice).take(attempts as usize) {
            prop_assert!(d <= longest, "{d:?} > longest {longest:?}");
        }
    }

    #[test]
    fn unjittered_delays_never_shrink_except_schedules(
        s in arb_strategy(),
        n in 1u32..100,
    ) {
        prop_assume!(!matches!(s, Shape::Schedule(_)));
        let b = Backoff::new(s, Jitter::None, None).unwrap();
        prop_assert!(b.delay(n, None, 0) <= b.delay(n + 1, None, 0));
    }
}

#[test]
fn same_seed_same_schedule() {
    let b = Backoff::new(
        Shape::Exponential {
            initial: ms(100),
            multiplier: 2.0,
        },
        Jitter::Full,
        Some(Duration::from_secs(10)),
    )
    .unwrap();
    let a: Vec<_> = b.delays(&SeededDice::new(42)).take(8).collect();
    let c: Vec<_> = b.delays(&SeededDice::new(42)).take(8).collect();
    assert_eq!(a, c);
}

#[test]
fn invalid_backoffs_name_the_field() {
    let exp = |m| Shape::Exponential {
        initial: ms(1),
        multiplier: m,
    };
    assert_eq!(
        Backoff::new(exp(0.5), Jitter::None, None)
            .unwrap_err()
            .field(),
        "multiplier"
    );
    assert_eq!(
        Backoff::new(exp(f64::NAN), Jitter::None, None)
            .unwrap_err()
            .field(),
        "multiplier"
    );
    assert_eq!(
        Backoff::new(exp(2.0), Jitter::Decorrelated, None)
            .unwrap_err()
            .field(),
        "max"
    );
    assert_eq!(
        Backoff::new(Shape::Schedule(Arc::from([])), Jitter::None, None)
            .unwrap_err()
            .field(),
        "schedule"
    );
    assert_eq!(
        Backoff::new(exp(2.0), Jitter::Proportional(2.0), None)
            .unwrap_err()
            .field(),
        "jitter"
    );
}

#[test]
fn equal_jitter_keeps_at_least_half() {
    let b = Backoff::new(Shape::Fixed(ms(1000)), Jitter::Equal, None).unwrap();
    assert_eq!(b.delay(1, None, 0), ms(500));
    assert_eq!(b.delay(1, None, u64::MAX), ms(1000));
}
