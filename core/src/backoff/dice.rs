//! The injected source of randomness for jitter.
//!
//! Jitter exists to spread retries of many consumers apart, so production
//! wants real randomness; tests want the same delays every run. `decide`
//! therefore takes one `u64` roll as an argument (it stays pure), and the
//! worker draws that roll from a [`Dice`] it was given.

use std::{fmt, sync::Mutex};

/// A source of uniformly distributed `u64` rolls.
pub trait Dice: Send + Sync + fmt::Debug {
    /// One roll.
    fn roll(&self) -> u64;
}

/// Fresh randomness on every roll (the default in production).
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadDice;

impl Dice for ThreadDice {
    fn roll(&self) -> u64 {
        fastrand::u64(..)
    }
}

/// A seeded, reproducible sequence of rolls (for tests and drills).
///
/// ```
/// use parkway_core::{Dice, SeededDice};
/// let (a, b) = (SeededDice::new(7), SeededDice::new(7));
/// assert_eq!(a.roll(), b.roll());
/// ```
#[derive(Debug)]
pub struct SeededDice(Mutex<fastrand::Rng>);

impl SeededDice {
    /// Dice that always produce the same sequence for the same seed.
    pub fn new(seed: u64) -> Self {
        SeededDice(Mutex::new(fastrand::Rng::with_seed(seed)))
    }
}

impl Dice for SeededDice {
    fn roll(&self) -> u64 {
        // A poisoned lock only means another roll panicked mid-way; the
        // generator state is still a valid generator state.
        let mut rng = self.0.lock().unwrap_or_else(|p| p.into_inner());
        rng.u64(..)
    }
}

/// Picks a value in `lo..=hi` (nanoseconds) from a roll, without floats.
pub(crate) fn pick(lo: u128, hi: u128, roll: u64) -> u128 {
    if hi <= lo {
        return lo;
    }
    let span = hi - lo + 1;
    lo + ((u128::from(roll) * span) >> 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_covers_both_ends() {
        assert_eq!(pick(10, 20, 0), 10);
        assert_eq!(pick(10, 20, u64::MAX), 20);
        assert_eq!(pick(5, 5, 12345), 5);
    }
}
