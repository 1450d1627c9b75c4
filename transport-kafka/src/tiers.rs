//! Retry tiers: a handful of topics by delay magnitude.
//!
//! Why not one topic per attempt, or per delay? Every retry record carries
//! its exact due time in `x-parkway-due-at`, and the consumer holds it until
//! then, so a tier topic does not need to delay anything by itself. Tiers
//! only group records whose delays are alike, so that a long delay never
//! holds back the committed offset of short ones for long. Six magnitudes
//! serve any schedule.

use std::time::Duration;

use parkway_core::RetryPolicy;

/// Upper bounds of the tiers, and their topic labels.
const TIERS: &[(Duration, &str)] = &[
    (Duration::from_secs(1), "1s"),
    (Duration::from_secs(10), "10s"),
    (Duration::from_secs(60), "1m"),
    (Duration::from_secs(600), "10m"),
    (Duration::from_secs(3600), "1h"),
    (Duration::from_secs(24 * 3600), "1d"),
];

/// The longest delay the tiers hold (one day; retention must exceed it).
pub const MAX_DELAY: Duration = Duration::from_secs(24 * 3600);

/// The tiers a set of policies needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TierPlan {
    tiers: Vec<(Duration, &'static str)>,
}

impl TierPlan {
    /// The tiers covering every delay the policies can ask for.
    pub fn for_policies<'a>(policies: impl IntoIterator<Item = &'a RetryPolicy>) -> Self {
        let longest = policies
            .into_iter()
            .filter(|p| p.max_attempts() > 1)
            .map(RetryPolicy::longest_delay)
            .max();
        let tiers = match longest {
            None => Vec::new(),
            Some(l) => {
                let upto = TIERS
                    .iter()
                    .position(|(b, _)| *b >= l)
                    .unwrap_or(TIERS.len() - 1);
                TIERS[..=upto].to_vec()
            }
        };
        TierPlan { tiers }
    }

    /// The tier labels, shortest first.
    pub fn labels(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.tiers.iter().map(|(_, l)| *l)
    }

    /// The tier a delay goes to: the shortest whose bound is not below it.
    pub fn tier_for(&self, delay: Duration) -> Option<&'static str> {
        self.tiers
            .iter()
            .find(|(b, _)| *b >= delay)
            .or(self.tiers.last())
            .map(|(_, l)| *l)
    }
}

#[cfg(test)]
mod tests {
    use parkway_core::Backoff;

    use super::*;

    #[test]
    fn a_handful_of_tiers_cover_the_policies() {
        let p = RetryPolicy::builder()
            .max_attempts(5)
            .backoff(Backoff::fixed(Duration::from_secs(45)))
            .build()
            .unwrap();
        let plan = TierPlan::for_policies([&p]);
        assert_eq!(plan.labels().collect::<Vec<_>>(), ["1s", "10s", "1m"]);
        assert_eq!(plan.tier_for(Duration::from_millis(300)), Some("1s"));
        assert_eq!(plan.tier_for(Duration::from_secs(45)), Some("1m"));
        let once = RetryPolicy::builder().max_attempts(1).build().unwrap();
        assert_eq!(
            TierPlan::for_policies([&once]).tier_for(Duration::from_secs(1)),
            None
        );
    }
}
