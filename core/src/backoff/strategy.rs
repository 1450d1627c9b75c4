//! The deterministic part of a backoff: the base delay for attempt *n*.

use std::{sync::Arc, time::Duration};

/// How the base delay grows with the attempt number (1-based).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Strategy {
    /// The same delay every time.
    Fixed(Duration),
    /// `initial + step × (n − 1)`.
    Linear {
        /// Delay before the first retry.
        initial: Duration,
        /// Added per attempt.
        step: Duration,
    },
    /// `initial × multiplier^(n − 1)`.
    Exponential {
        /// Delay before the first retry.
        initial: Duration,
        /// Growth factor, ≥ 1.
        multiplier: f64,
    },
    /// `initial × fib(n)` with fib = 1, 2, 3, 5, 8, …
    Fibonacci {
        /// Delay before the first retry.
        initial: Duration,
    },
    /// An explicit list; the last entry repeats.
    Schedule(Arc<[Duration]>),
}

impl Strategy {
    /// The base delay for attempt `n` (1-based; 0 is treated as 1), never
    /// above `ceiling`.
    pub fn base(&self, n: u32, ceiling: Duration) -> Duration {
        let n = n.max(1);
        let d = match self {
            Strategy::Fixed(d) => *d,
            Strategy::Linear { initial, step } => step
                .checked_mul(n - 1)
                .and_then(|s| initial.checked_add(s))
                .unwrap_or(ceiling),
            Strategy::Exponential {
                initial,
                multiplier,
            } => exponential(*initial, *multiplier, n, ceiling),
            Strategy::Fibonacci { initial } => fibonacci(*initial, n, ceiling),
            Strategy::Schedule(steps) => {
                let i = usize::try_from(n - 1).unwrap_or(usize::MAX);
                steps
                    .get(i)
                    .or_else(|| steps.last())
                    .copied()
                    .unwrap_or_default()
            }
        };
        d.min(ceiling)
    }

    /// The first base delay (used as the floor of decorrelated jitter).
    pub fn first(&self, ceiling: Duration) -> Duration {
        self.base(1, ceiling)
    }
}

fn exponential(initial: Duration, multiplier: f64, n: u32, ceiling: Duration) -> Duration {
    let exp = i32::try_from(n - 1).unwrap_or(i32::MAX);
    let secs = initial.as_secs_f64() * multiplier.powi(exp);
    if !secs.is_finite() || secs >= ceiling.as_secs_f64() {
        return ceiling;
    }
    Duration::try_from_secs_f64(secs).unwrap_or(ceiling)
}

fn fibonacci(initial: Duration, n: u32, ceiling: Duration) -> Duration {
    let (mut a, mut b) = (1u32, 2u32);
    for _ in 1..n {
        let next = a.saturating_add(b);
        a = b;
        b = next;
        // Once past the ceiling the value can only grow: stop early, so a
        // forged attempt of 4 billion costs a handful of iterations.
        if initial.checked_mul(a).is_none_or(|d| d >= ceiling) {
            return ceiling;
        }
    }
    initial.checked_mul(a).unwrap_or(ceiling)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CEIL: Duration = Duration::from_secs(3600);
    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn each_strategy_grows_as_documented() {
        let lin = Strategy::Linear {
            initial: ms(100),
            step: ms(50),
        };
        assert_eq!(
            [1, 2, 3].map(|n| lin.base(n, CEIL)),
            [ms(100), ms(150), ms(200)]
        );
        let exp = Strategy::Exponential {
            initial: ms(100),
            multiplier: 2.0,
        };
        assert_eq!(
            [1, 2, 4].map(|n| exp.base(n, CEIL)),
            [ms(100), ms(200), ms(800)]
        );
        let fib = Strategy::Fibonacci { initial: ms(10) };
        assert_eq!(
            [1, 2, 3, 4, 5].map(|n| fib.base(n, CEIL)),
            [ms(10), ms(20), ms(30), ms(50), ms(80)]
        );
        let sched = Strategy::Schedule(Arc::from([ms(500), ms(5000)]));
        assert_eq!(
            [1, 2, 9].map(|n| sched.base(n, CEIL)),
            [ms(500), ms(5000), ms(5000)]
        );
    }

    #[test]
    fn huge_attempts_saturate_at_the_ceiling() {
        for s in [
            Strategy::Linear {
                initial: ms(1),
                step: Duration::from_secs(u64::MAX / 2),
            },
            Strategy::Exponential {
                initial: ms(1),
                multiplier: 10.0,
            },
            Strategy::Fibonacci { initial: ms(1) },
        ] {
            assert_eq!(s.base(u32::MAX, CEIL), CEIL, "{s:?}");
        }
    }
}
