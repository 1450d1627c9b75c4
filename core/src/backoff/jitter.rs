//! Jitter: spreading retries of many consumers apart so that a shared outage
//! does not turn into synchronized retry waves.

use std::{fmt, str::FromStr, time::Duration};

use super::dice::pick;

/// How a base delay is randomised.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Jitter {
    /// Exactly the base delay.
    None,
    /// Uniform in `[0, base]`.
    Full,
    /// Uniform in `[base/2, base]`.
    Equal,
    /// Uniform in `[first, 3 × previous]` (AWS "decorrelated"), capped.
    Decorrelated,
    /// Uniform in `[base × (1 − r), base × (1 + r)]`, capped; `r` in `(0, 1]`.
    Proportional(f64),
}

/// A jitter spelled in config that is not one of the known forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid jitter {0:?}: expected none, full, equal, decorrelated or a proportion like \"10%\" (0% < x ≤ 100%)"
)]
pub struct InvalidJitter(String);

impl Jitter {
    /// The smallest and largest delay this jitter can produce.
    pub(crate) fn bounds(
        self,
        base: Duration,
        first: Duration,
        previous: Duration,
        cap: Duration,
    ) -> (Duration, Duration) {
        match self {
            Jitter::None => (base, base),
            Jitter::Full => (Duration::ZERO, base),
            Jitter::Equal => (base / 2, base),
            Jitter::Decorrelated => {
                let lo = first.min(cap);
                let hi = previous.max(first).saturating_mul(3).min(cap);
                (lo, hi.max(lo))
            }
            Jitter::Proportional(r) => {
                let spread = base.mul_f64(r.clamp(0.0, 1.0));
                (
                    base.saturating_sub(spread),
                    base.saturating_add(spread).min(cap),
                )
            }
        }
    }

    /// Applies the jitter with one roll of the dice.
    pub(crate) fn apply(
        self,
        base: Duration,
        first: Duration,
        previous: Duration,
        cap: Duration,
        roll: u64,
    ) -> Duration {
        let (lo, hi) = self.bounds(base, first, previous, cap);
        let nanos = pick(lo.as_nanos(), hi.as_nanos(), roll);
        let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
        // The remainder is below 10^9 and always fits.
        let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
        Duration::new(secs, sub)
    }
}

impl FromStr for Jitter {
    type Err = InvalidJitter;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidJitter(s.chars().take(40).collect());
        match s {
            "none" => Ok(Jitter::None),
            "full" => Ok(Jitter::Full),
            "equal" => Ok(Jitter::Equal),
            "decorrelated" => Ok(Jitter::Decorrelated),
            _ => {
                let pct: f64 = s
                    .strip_suffix('%')
                    .ok_or_else(bad)?
                    .trim()
                    .parse()
                    .map_err(|_| bad())?;
                if pct.is_finite() && pct > 0.0 && pct <= 100.0 {
                    Ok(Jitter::Proportional(pct / 100.0))
                } else {
                    Err(bad())
                }
            }
        }
    }
}

impl fmt::Display for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Jitter::None => f.write_str("none"),
            Jitter::Full => f.write_str("full"),
            Jitter::Equal => f.write_str("equal"),
            Jitter::Decorrelated => f.write_str("decorrelated"),
            Jitter::Proportional(r) => write!(f, "±{}%", r * 100.0),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Jitter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_config_spellings() {
        assert_eq!("full".parse(), Ok(Jitter::Full));
        assert_eq!("10%".parse(), Ok(Jitter::Proportional(0.1)));
        assert!("0%".parse::<Jitter>().is_err());
        assert!("150%".parse::<Jitter>().is_err());
        assert!("wobbly".parse::<Jitter>().is_err());
        assert!("NaN%".parse::<Jitter>().is_err());
    }
}
