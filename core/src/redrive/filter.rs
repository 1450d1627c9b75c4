//! Which parked messages a redrive selects.

use std::time::SystemTime;

use crate::{
    failure::{FailureClass, Reason},
    transport::Parked,
};

/// Selects parked messages; every condition set must hold (AND).
///
/// ```
/// use parkway_core::{redrive::Filter, FailureClass};
/// let f = Filter::default().reason("DOWNSTREAM_TIMEOUT").class(FailureClass::Transient);
/// assert!(!f.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Any of these reasons (empty = any reason).
    pub reasons: Vec<Reason>,
    /// This failure class.
    pub class: Option<FailureClass>,
    /// This message type.
    pub message_type: Option<String>,
    /// First failure at or after this time.
    pub first_failure_from: Option<SystemTime>,
    /// First failure before this time.
    pub first_failure_until: Option<SystemTime>,
    /// This correlation id.
    pub correlation_id: Option<String>,
    /// Headers that must be present with exactly these values.
    pub headers: Vec<(String, String)>,
}

impl Filter {
    /// Adds a reason to match.
    #[must_use]
    pub fn reason(mut self, reason: impl Into<Reason>) -> Self {
        self.reasons.push(reason.into());
        self
    }

    /// Requires a class.
    #[must_use]
    pub fn class(mut self, class: FailureClass) -> Self {
        self.class = Some(class);
        self
    }

    /// Requires a message type.
    #[must_use]
    pub fn message_type(mut self, t: impl Into<String>) -> Self {
        self.message_type = Some(t.into());
        self
    }

    /// Requires the first failure in `[from, until)`.
    #[must_use]
    pub fn first_failure_between(mut self, from: SystemTime, until: SystemTime) -> Self {
        self.first_failure_from = Some(from);
        self.first_failure_until = Some(until);
        self
    }

    /// Requires a correlation id.
    #[must_use]
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// Requires a header value.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Whether the filter selects everything.
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// Whether `parked` is selected.
    pub fn matches(&self, parked: &Parked) -> bool {
        let env = &parked.envelope;
        let msg = &parked.message;
        let reason_ok = self.reasons.is_empty()
            || env
                .reason
                .as_ref()
                .is_some_and(|r| self.reasons.contains(r));
        let class_ok = self.class.is_none_or(|c| env.class == Some(c));
        let type_ok = self
            .message_type
            .as_deref()
            .is_none_or(|t| env.message_type.as_deref().or(msg.message_type.as_deref()) == Some(t));
        let corr_ok = self.correlation_id.as_deref().is_none_or(|c| {
            env.correlation_id
                .as_deref()
                .or(msg.correlation_id.as_deref())
                == Some(c)
        });
        let first = env.first_failure_at;
        let from_ok = self
            .first_failure_from
            .is_none_or(|from| first.is_some_and(|t| t >= from));
        let until_ok = self
            .first_failure_until
            .is_none_or(|until| first.is_some_and(|t| t < until));
        let headers_ok = self
            .headers
            .iter()
            .all(|(k, v)| msg.headers.get(k) == Some(v.as_str()));
        reason_ok && class_ok && type_ok && corr_ok && from_ok && until_ok && headers_ok
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::{Envelope, EnvelopeLimits, Message};

    fn parked(reason: &'static str, class: FailureClass, first: u64) -> Parked {
        let env = Envelope {
            attempts: 1,
            reason: Some(reason.into()),
            class: Some(class),
            first_failure_at: Some(UNIX_EPOCH + Duration::from_secs(first)),
            correlation_id: Some("c-9".into()),
            ..Envelope::default()
        };
        let mut msg = Message::new("orders", "{}")
            .with_type("CreateOrder")
            .with_header("tenant", "acme");
        env.encode(&mut msg.headers, &EnvelopeLimits::default());
        Parked::new("1", msg, None)
    }

    #[test]
    fn every_condition_must_hold() {
        let p = parked("DOWNSTREAM_TIMEOUT", FailureClass::Transient, 1_780_000_000);
        assert!(Filter::default().matches(&p));
        assert!(
            Filter::default()
                .reason("OTHER")
                .reason("DOWNSTREAM_TIMEOUT")
                .matches(&p)
        );
        assert!(!Filter::default().reason("OTHER").matches(&p));
        assert!(
            !Filter::default()
                .class(FailureClass::PermanentBusiness)
                .matches(&p)
        );
        assert!(Filter::default().message_type("CreateOrder").matches(&p));
        assert!(!Filter::default().message_type("Refund").matches(&p));
        assert!(Filter::default().correlation_id("c-9").matches(&p));
        assert!(Filter::default().header("tenant", "acme").matches(&p));
        assert!(!Filter::default().header("tenant", "other").matches(&p));
        let t = |s| UNIX_EPOCH + Duration::from_secs(s);
        assert!(
            Filter::default()
                .first_failure_between(t(1_779_999_999), t(1_780_000_001))
                .matches(&p)
        );
        assert!(
            !Filter::default()
                .first_failure_between(t(1_780_000_001), t(1_790_000_000))
                .matches(&p)
        );
    }
}
