//! The six failure classes and what each one means for the lifecycle.

use std::{fmt, str::FromStr};

/// What kind of failure a reason is; the class drives [`crate::decide()`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FailureClass {
    /// Likely to succeed later (timeouts, 503s): retried within the budget.
    Transient,
    /// Lost a race (optimistic lock, serialisation failure): retried.
    Contention,
    /// Will fail the same way every time (malformed payload): parked at once.
    PermanentTechnical,
    /// The business said no (illegal transition): parked at once.
    PermanentBusiness,
    /// Already processed: acknowledged and counted, never retried or parked.
    Duplicate,
    /// Not known: retried within the budget, then handled as exhausted.
    Unknown,
}

/// A class name that is not one of the six.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown failure class {0:?}: expected transient, contention, permanent-technical, permanent-business, duplicate or unknown"
)]
pub struct InvalidClass(String);

impl FailureClass {
    /// Every class, in declaration order.
    pub const ALL: [FailureClass; 6] = [
        FailureClass::Transient,
        FailureClass::Contention,
        FailureClass::PermanentTechnical,
        FailureClass::PermanentBusiness,
        FailureClass::Duplicate,
        FailureClass::Unknown,
    ];

    /// Whether a failure of this class may be retried.
    pub const fn is_retryable(self) -> bool {
        matches!(
            self,
            FailureClass::Transient | FailureClass::Contention | FailureClass::Unknown
        )
    }

    /// Whether this class parks on the first failure.
    pub const fn is_permanent(self) -> bool {
        matches!(
            self,
            FailureClass::PermanentTechnical | FailureClass::PermanentBusiness
        )
    }

    /// The kebab-case name used in config and headers.
    pub const fn as_str(self) -> &'static str {
        match self {
            FailureClass::Transient => "transient",
            FailureClass::Contention => "contention",
            FailureClass::PermanentTechnical => "permanent-technical",
            FailureClass::PermanentBusiness => "permanent-business",
            FailureClass::Duplicate => "duplicate",
            FailureClass::Unknown => "unknown",
        }
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FailureClass {
    type Err = InvalidClass;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FailureClass::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| InvalidClass(s.chars().take(40).collect()))
    }
}

impl<'de> serde::Deserialize<'de> for FailureClass {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for FailureClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for c in FailureClass::ALL {
            assert_eq!(c.as_str().parse::<FailureClass>(), Ok(c));
        }
        assert!("fatal".parse::<FailureClass>().is_err());
    }
}
