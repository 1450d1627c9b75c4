//! Delay tiers: which wait queues a set of policies needs.
//!
//! Why tiers? RabbitMQ here has no delayed-message plugin, and a per-message
//! `expiration` only expires at the head of a queue (a 2 s message holds up a
//! 200 ms one behind it). A queue-level `x-message-ttl` expires every message
//! after the same time, so FIFO order is due order: one wait queue per delay.
//! A policy without jitter needs exactly its distinct delays. With jitter the
//! delays are continuous, so they are rounded to the nearest point of a
//! ladder dense enough that the rounding error stays within
//! max(25 ms, 2 % of the delay): 50 ms apart up to 1.25 s, then 4 % apart.
//! Only tiers a policy can reach are planned; wait queues are declared when
//! first used.

use std::{collections::BTreeSet, time::Duration};

use parkway_core::{Jitter, RetryPolicy};

/// Largest planned rounding error below the crossover, in ms.
const STEP_MS: u64 = 50;
/// Where the ladder turns from linear to geometric.
const CROSSOVER_MS: u64 = 1_250;
/// Geometric ratio above the crossover (±2 % around each point).
const RATIO: f64 = 1.04;
/// Most wait queues one work queue may have.
pub const MAX_TIERS: usize = 400;
/// Most of a delay left for the worker to wait in process after a message
/// comes back from a lower tier (the worker's early-hold limit must be at
/// least this).
pub const HOLD_CAP: Duration = Duration::from_secs(1);
/// RabbitMQ's longest `x-message-ttl` (2^32 − 1 ms, about 49 days).
pub const MAX_TTL: Duration = Duration::from_millis(u32::MAX as u64);

/// The wait-queue tiers of one work queue.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TierPlan {
    tiers: Vec<Duration>,
}

/// A policy whose delays would need too many wait queues.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the policies need {needed} wait queues (at most {MAX_TIERS}); narrow the jitter or the backoff range"
)]
pub struct TooManyTiers {
    needed: usize,
}

impl TierPlan {
    /// Plans the tiers every retry of these policies can need.
    pub fn for_policies<'a>(
        policies: impl IntoIterator<Item = &'a RetryPolicy>,
    ) -> Result<Self, TooManyTiers> {
        let mut set = BTreeSet::new();
        for p in policies {
            let cap = p.max_total_delay().unwrap_or(MAX_TTL).min(MAX_TTL);
            let b = p.backoff();
            for n in 1..p.max_attempts() {
                let (lo, hi) = if b.jitter() == Jitter::Decorrelated {
                    (b.bounds(n, None).0, b.cap())
                } else {
                    b.bounds(n, None)
                };
                let (lo, hi) = (lo.min(cap), hi.min(cap));
                if lo == hi {
                    set.insert(ms(lo));
                } else {
                    ladder(ms(lo), ms(hi), &mut set);
                }
                if set.len() > MAX_TIERS {
                    return Err(TooManyTiers { needed: set.len() });
                }
            }
        }
        set.remove(&0);
        Ok(TierPlan {
            tiers: set.into_iter().map(Duration::from_millis).collect(),
        })
    }

    /// The tiers, shortest first.
    pub fn tiers(&self) -> &[Duration] {
        &self.tiers
    }

    /// The tier a delay goes to. The largest tier not above the delay, if
    /// the rest is at most [`HOLD_CAP`]: the message comes back early and
    /// the worker waits for its due time, so the delay is exact. Otherwise
    /// the nearest tier (within 2 % on the ladder). `None`: publish straight
    /// back (delays shorter than the first tier, waited for in process).
    pub fn tier_for(&self, delay: Duration) -> Option<Duration> {
        let d = ms(delay);
        let hold = ms(HOLD_CAP);
        if d == 0 {
            return None;
        }
        let i = self.tiers.partition_point(|t| ms(*t) <= d);
        let floor = i.checked_sub(1).and_then(|j| self.tiers.get(j)).copied();
        let above = self.tiers.get(i).copied();
        match (floor, above) {
            (Some(f), _) if d - ms(f) <= hold => Some(f),
            (None, _) if d <= hold => None,
            (Some(f), Some(a)) => Some(if d - ms(f) <= ms(a) - d { f } else { a }),
            (Some(f), None) => Some(f),
            (None, Some(a)) => Some(a),
            (None, None) => None,
        }
    }

    /// Worst relative rounding error of the plan, in percent (for
    /// capabilities and the start-up report).
    pub fn max_error_percent(&self) -> u32 {
        2
    }
}

/// Adds the ladder points that can be nearest to some delay in `[lo, hi]`.
fn ladder(lo: u64, hi: u64, set: &mut BTreeSet<u64>) {
    let mut p = lo.saturating_sub(STEP_MS) / STEP_MS * STEP_MS;
    while p < CROSSOVER_MS.min(hi + STEP_MS) {
        set.insert(p);
        p += STEP_MS;
    }
    if hi + STEP_MS < CROSSOVER_MS {
        return;
    }
    let mut g = CROSSOVER_MS as f64;
    let top = hi as f64 * RATIO;
    while g <= top {
        if g * RATIO >= lo as f64 {
            set.insert(g.round() as u64);
        }
        g *= RATIO;
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use parkway_core::{Backoff, Strategy};
    use proptest::prelude::*;

    use super::*;

    fn policy(backoff: Backoff, attempts: u32) -> RetryPolicy {
        RetryPolicy::builder()
            .max_attempts(attempts)
            .backoff(backoff)
            .build()
            .unwrap()
    }

    fn exp(jitter: Jitter, max_s: u64) -> Backoff {
        Backoff::new(
            Strategy::Exponential {
                initial: Duration::from_millis(100),
                multiplier: 2.0,
            },
            jitter,
            Some(Duration::from_secs(max_s)),
        )
        .unwrap()
    }

    #[test]
    fn unjittered_policies_get_exactly_their_delays() {
        let p = policy(exp(Jitter::None, 60), 5);
        let plan = TierPlan::for_policies([&p]).unwrap();
        let want: Vec<_> = [100, 200, 400, 800].map(Duration::from_millis).to_vec();
        assert_eq!(plan.tiers(), want);
        assert_eq!(
            plan.tier_for(Duration::from_millis(400)),
            Some(Duration::from_millis(400))
        );
    }

    #[test]
    fn zero_delays_go_straight_back() {
        let p = policy(Backoff::fixed(Duration::ZERO), 3);
        let plan = TierPlan::for_policies([&p]).unwrap();
        assert!(plan.tiers().is_empty());
        assert_eq!(plan.tier_for(Duration::ZERO), None);
    }

    #[test]
    fn huge_ranges_are_refused() {
        let p = policy(exp(Jitter::Full, 40 * 24 * 3600), 40);
        assert!(TierPlan::for_policies([&p]).is_err());
    }

    proptest! {
        #[test]
        fn every_reachable_delay_rounds_within_the_goal(
            jitter in prop_oneof![Just(Jitter::Full), Just(Jitter::Equal), Just(Jitter::Proportional(0.2)), Just(Jitter::Decorrelated)],
            max_s in 1u64..600,
            attempts in 2u32..10,
            n in 1u32..9,
            roll in any::<u64>(),
        ) {
            let p = policy(exp(jitter, max_s), attempts);
            let plan = TierPlan::for_policies([&p]).unwrap();
            prop_assume!(n < attempts);
            let d = p.backoff().delay(n, None, roll);
            match plan.tier_for(d) {
                // Rounded down: the worker waits out the rest (≤ HOLD_CAP).
                Some(t) if t <= d && d - t <= HOLD_CAP => {}
                Some(t) => {
                    let err = t.abs_diff(d);
                    prop_assert!(err <= d.mul_f64(0.02) + Duration::from_millis(1), "{d:?} -> {t:?}");
                }
                None => prop_assert!(d <= HOLD_CAP, "{d:?} has no tier"),
            }
        }
    }
}
