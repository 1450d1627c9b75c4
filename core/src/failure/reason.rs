//! Reason codes: the short, stable strings operators group failures by.
//!
//! A reason is what dashboards, `park_on` lists and redrive filters match on,
//! so it must be cheap to copy around the hot path (no allocation when a
//! decision carries it) and safe to put in a header: printable ASCII, bounded.

use std::{borrow::Borrow, fmt, sync::Arc};

/// Longest reason code accepted, in bytes.
pub const MAX_REASON_LEN: usize = 64;

/// A stable failure reason code such as `DOWNSTREAM_TIMEOUT`.
///
/// Cloning never allocates: literals are stored as `&'static str`, parsed
/// codes behind an [`Arc`].
///
/// ```
/// use parkway_core::Reason;
/// let r = Reason::parse("DOWNSTREAM_TIMEOUT").unwrap();
/// assert_eq!(r, Reason::from_static("DOWNSTREAM_TIMEOUT"));
/// assert!(Reason::parse("has spaces").is_err());
/// ```
#[derive(Clone)]
pub struct Reason(Repr);

#[derive(Clone)]
enum Repr {
    Static(&'static str),
    Shared(Arc<str>),
}

/// A reason code that is empty, too long, or uses characters outside
/// `A-Z a-z 0-9 _ - . :`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid reason code {shown:?}: {why}")]
pub struct InvalidReason {
    shown: String,
    why: &'static str,
}

impl Reason {
    /// The handler did not finish within the worker's handler timeout.
    pub const HANDLER_TIMEOUT: Reason = Reason::from_static("HANDLER_TIMEOUT");
    /// The handler panicked; the panic was caught and classified.
    pub const HANDLER_PANIC: Reason = Reason::from_static("HANDLER_PANIC");
    /// A failure whose code could not be understood.
    pub const UNKNOWN_FAILURE: Reason = Reason::from_static("UNKNOWN_FAILURE");

    /// A reason from a string literal, checked only by the caller's eyes.
    ///
    /// Use [`Reason::parse`] for anything that comes from outside the program.
    pub const fn from_static(code: &'static str) -> Self {
        Reason(Repr::Static(code))
    }

    /// Validates a reason code from outside input (config, headers).
    pub fn parse(code: &str) -> Result<Self, InvalidReason> {
        validate(code)?;
        Ok(Reason(Repr::Shared(Arc::from(code))))
    }

    /// This reason if it is valid, otherwise a valid one derived from it:
    /// characters outside the allowed set become `_`, the length is cut to
    /// [`MAX_REASON_LEN`], and an empty code becomes `UNKNOWN_FAILURE`.
    /// (Used on handler reasons, which `from_static` does not check.)
    pub fn sanitized(self) -> Self {
        if validate(self.as_str()).is_ok() {
            return self;
        }
        let fixed: String = self
            .as_str()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_-.:".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .take(MAX_REASON_LEN)
            .collect();
        Reason::parse(&fixed).unwrap_or(Reason::UNKNOWN_FAILURE)
    }

    /// The code as a string.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Static(s) => s,
            Repr::Shared(s) => s,
        }
    }
}

fn validate(code: &str) -> Result<(), InvalidReason> {
    let fail = |why| {
        let shown: String = code.chars().take(MAX_REASON_LEN).collect();
        Err(InvalidReason { shown, why })
    };
    if code.is_empty() {
        return fail("it is empty");
    }
    if code.len() > MAX_REASON_LEN {
        return fail("it is longer than 64 bytes");
    }
    if !code
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
    {
        return fail("only A-Z a-z 0-9 _ - . : are allowed");
    }
    Ok(())
}

impl From<&'static str> for Reason {
    fn from(code: &'static str) -> Self {
        Reason::from_static(code)
    }
}

impl PartialEq for Reason {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}
impl Eq for Reason {}

impl PartialOrd for Reason {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Reason {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for Reason {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Borrow<str> for Reason {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Reason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Reason::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_bad_codes() {
        assert!(Reason::parse("").is_err());
        assert!(Reason::parse(&"A".repeat(65)).is_err());
        assert!(Reason::parse("NEW\nLINE").is_err());
        assert!(Reason::parse("OK_CODE-1.a:b").is_ok());
    }

    #[test]
    fn sanitized_reasons_are_valid() {
        assert_eq!(
            Reason::from_static("has spaces").sanitized().as_str(),
            "has_spaces"
        );
        assert_eq!(Reason::from_static("").sanitized(), Reason::UNKNOWN_FAILURE);
        assert_eq!(Reason::from_static("OK").sanitized().as_str(), "OK");
    }

    proptest! {
        #[test]
        fn sanitized_always_parses(s in ".{0,100}") {
            let owned: &'static str = Box::leak(s.into_boxed_str());
            let r = Reason::from_static(owned).sanitized();
            prop_assert!(Reason::parse(r.as_str()).is_ok());
        }

        #[test]
        fn parse_never_panics_and_accepts_only_safe_codes(s in ".{0,80}") {
            if let Ok(r) = Reason::parse(&s) {
                prop_assert!(r.as_str().len() <= MAX_REASON_LEN);
                prop_assert!(r.as_str().bytes().all(|b| b.is_ascii_graphic()));
            }
        }
    }
}
