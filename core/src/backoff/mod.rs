//! Backoff: how long to wait before retry *n*.
//!
//! Retrying without a growing delay is attack traffic against your own
//! dependency; retrying in lock-step from many consumers is a thundering
//! herd. A [`Backoff`] is a [`Strategy`] (the base delay per attempt), a
//! [`Jitter`] (how it is spread) and a cap. It is a pure function of the
//! attempt, the previous delay and one roll of the injected [`Dice`], so the
//! same seed gives the same schedule in tests. It can also be iterated.

mod dice;
mod jitter;
mod strategy;

pub use dice::{Dice, SeededDice, ThreadDice};
pub use jitter::{InvalidJitter, Jitter};
pub use strategy::Strategy;

use std::time::Duration;

/// No delay is ever longer than this, capped or not (one year).
pub const CEILING: Duration = Duration::from_secs(365 * 24 * 3600);

/// A backoff that cannot work as written; names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid backoff: {field} {why}")]
pub struct InvalidBackoff {
    field: &'static str,
    why: &'static str,
}

impl InvalidBackoff {
    /// The offending field (`initial`, `multiplier`, `max`, `schedule`, `jitter`).
    pub fn field(&self) -> &'static str {
        self.field
    }
}

/// A validated backoff: strategy, jitter and cap.
///
/// ```
/// use std::time::Duration;
/// use parkway_core::{Backoff, Jitter, SeededDice, Strategy};
/// let b = Backoff::new(
///     Strategy::Exponential { initial: Duration::from_secs(1), multiplier: 2.0 },
///     Jitter::None,
///     Some(Duration::from_secs(5)),
/// ).unwrap();
/// let delays: Vec<_> = b.delays(&SeededDice::new(1)).take(4).collect();
/// assert_eq!(delays, [1, 2, 4, 5].map(Duration::from_secs));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    strategy: Strategy,
    jitter: Jitter,
    cap: Duration,
}

impl Backoff {
    /// Validates and builds a backoff. `max` caps every delay, jitter included.
    pub fn new(
        strategy: Strategy,
        jitter: Jitter,
        max: Option<Duration>,
    ) -> Result<Self, InvalidBackoff> {
        let bad = |field, why| Err(InvalidBackoff { field, why });
        let cap = max.unwrap_or(CEILING).min(CEILING);
        match &strategy {
            Strategy::Exponential {
                initial,
                multiplier,
            } => {
                if !(multiplier.is_finite() && *multiplier >= 1.0) {
                    return bad("multiplier", "must be a finite number ≥ 1");
                }
                if initial.is_zero() {
                    return bad("initial", "must be greater than zero");
                }
            }
            Strategy::Fibonacci { initial } if initial.is_zero() => {
                return bad("initial", "must be greater than zero");
            }
            Strategy::Schedule(steps) if steps.is_empty() => {
                return bad("schedule", "must list at least one delay");
            }
            _ => {}
        }
        if max.is_some_and(|m| m.is_zero()) {
            return bad("max", "must be greater than zero");
        }
        if let Jitter::Proportional(r) = jitter {
            if !(r.is_finite() && r > 0.0 && r <= 1.0) {
                return bad("jitter", "proportion must be in (0%, 100%]");
            }
        }
        if jitter == Jitter::Decorrelated && max.is_none() {
            return bad(
                "max",
                "is required with decorrelated jitter (it grows ×3 per step)",
            );
        }
        Ok(Backoff {
            strategy,
            jitter,
            cap,
        })
    }

    /// A fixed delay without jitter.
    pub fn fixed(delay: Duration) -> Self {
        Backoff {
            strategy: Strategy::Fixed(delay.min(CEILING)),
            jitter: Jitter::None,
            cap: CEILING,
        }
    }

    /// The strategy.
    pub fn strategy(&self) -> &Strategy {
        &self.strategy
    }

    /// The jitter.
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The cap every delay respects.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// The delay before retry `attempt` (1-based), given the previous delay
    /// (for decorrelated jitter) and one roll of the dice.
    pub fn delay(&self, attempt: u32, previous: Option<Duration>, roll: u64) -> Duration {
        let (base, first) = self.base_and_first(attempt);
        let prev = previous.unwrap_or(first);
        self.jitter.apply(base, first, prev, self.cap, roll)
    }

    /// The smallest and largest delay [`Backoff::delay`] can return for these
    /// inputs, whatever the roll.
    pub fn bounds(&self, attempt: u32, previous: Option<Duration>) -> (Duration, Duration) {
        let (base, first) = self.base_and_first(attempt);
        let prev = previous.unwrap_or(first);
        self.jitter.bounds(base, first, prev, self.cap)
    }

    /// The longest delay any of the first `attempts` retries can wait, used by
    /// the start-up plan check.
    pub fn longest(&self, attempts: u32) -> Duration {
        if self.jitter == Jitter::Decorrelated {
            return self.cap;
        }
        // Every strategy but a schedule is non-decreasing, and a schedule is
        // short: scan the schedule, take the last attempt otherwise.
        let scan = match &self.strategy {
            Strategy::Schedule(s) => u32::try_from(s.len()).unwrap_or(u32::MAX).min(attempts),
            _ => 1,
        };
        (1..=scan)
            .chain(std::iter::once(attempts.max(1)))
            .map(|n| self.bounds(n, None).1)
            .max()
            .unwrap_or_default()
    }

    /// The delays of retries 1, 2, 3, … as an endless iterator.
    pub fn delays<'a>(&'a self, dice: &'a dyn Dice) -> Delays<'a> {
        Delays {
            backoff: self,
            dice,
            attempt: 0,
            previous: None,
        }
    }

    fn base_and_first(&self, attempt: u32) -> (Duration, Duration) {
        (
            self.strategy.base(attempt, self.cap),
            self.strategy.first(self.cap),
        )
    }
}

/// Iterator over a backoff's delays; see [`Backoff::delays`].
#[derive(Debug)]
pub struct Delays<'a> {
    backoff: &'a Backoff,
    dice: &'a dyn Dice,
    attempt: u32,
    previous: Option<Duration>,
}

impl Iterator for Delays<'_> {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        self.attempt = self.attempt.saturating_add(1);
        let d = self
            .backoff
            .delay(self.attempt, self.previous, self.dice.roll());
        self.previous = Some(d);
        Some(d)
    }
}

#[cfg(test)]
pub(crate) mod tests;
