//! Classification: a pure decision point between a handler's failure and the
//! retry rules.
//!
//! Why a trait and not a match in the worker? Because teams disagree about
//! reasons (is `HTTP_429` contention or transient?) and must be able to change
//! their minds in config, and test the mapping without a broker. The
//! rule-based classifier lets config override the handler: an operator can
//! reclassify `PAYMENT_DECLINED` as permanent without a deploy.

use std::collections::HashMap;

use super::{Failure, FailureClass, Reason};

/// A failure after classification: what [`crate::decide()`] consumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// The class the lifecycle acts on.
    pub class: FailureClass,
    /// The reason code.
    pub reason: Reason,
}

impl Classified {
    /// A classified failure.
    pub fn new(class: FailureClass, reason: impl Into<Reason>) -> Self {
        Classified {
            class,
            reason: reason.into(),
        }
    }
}

/// Maps a failure to its class. Pure: no I/O, no clock, no randomness.
pub trait Classifier: Send + Sync {
    /// Classifies one failure.
    fn classify(&self, failure: &Failure) -> Classified;
}

/// Classifies by reason code from configured rules.
///
/// Precedence: a configured rule for the reason, then the class the handler
/// gave, then the built-in rules (`HANDLER_TIMEOUT` is transient,
/// `HANDLER_PANIC` unknown), then the default class.
///
/// ```
/// use parkway_core::{Classifier, Failure, FailureClass, RuleClassifier};
/// let c = RuleClassifier::new(FailureClass::Unknown)
///     .with_rule("DESERIALIZATION_FAILED", FailureClass::PermanentTechnical);
/// assert_eq!(c.classify(&Failure::new("DESERIALIZATION_FAILED")).class, FailureClass::PermanentTechnical);
/// assert_eq!(c.classify(&Failure::new("SOMETHING_ELSE")).class, FailureClass::Unknown);
/// ```
#[derive(Debug, Clone)]
pub struct RuleClassifier {
    rules: HashMap<Reason, FailureClass>,
    default: FailureClass,
}

impl Default for RuleClassifier {
    fn default() -> Self {
        RuleClassifier::new(FailureClass::Unknown)
    }
}

impl RuleClassifier {
    /// A classifier with no rules and the given class for unknown reasons.
    pub fn new(default: FailureClass) -> Self {
        RuleClassifier {
            rules: HashMap::new(),
            default,
        }
    }

    /// Adds (or replaces) the rule for one reason.
    #[must_use]
    pub fn with_rule(mut self, reason: impl Into<Reason>, class: FailureClass) -> Self {
        self.rules.insert(reason.into(), class);
        self
    }

    /// The class used for reasons with no rule and no handler class.
    pub fn default_class(&self) -> FailureClass {
        self.default
    }
}

impl Classifier for RuleClassifier {
    fn classify(&self, failure: &Failure) -> Classified {
        let reason = failure.reason();
        let class = self
            .rules
            .get(reason.as_str())
            .copied()
            .or(failure.class())
            .or_else(|| builtin(reason))
            .unwrap_or(self.default);
        Classified {
            class,
            reason: reason.clone(),
        }
    }
}

fn builtin(reason: &Reason) -> Option<FailureClass> {
    if *reason == Reason::HANDLER_TIMEOUT {
        Some(FailureClass::Transient)
    } else if *reason == Reason::HANDLER_PANIC {
        Some(FailureClass::Unknown)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_rule_beats_handler_class() {
        let c = RuleClassifier::new(FailureClass::Unknown)
            .with_rule("PAYMENT_DECLINED", FailureClass::PermanentBusiness);
        let f = Failure::transient("PAYMENT_DECLINED");
        assert_eq!(c.classify(&f).class, FailureClass::PermanentBusiness);
    }

    #[test]
    fn handler_class_beats_default() {
        let c = RuleClassifier::new(FailureClass::PermanentTechnical);
        assert_eq!(
            c.classify(&Failure::transient("X")).class,
            FailureClass::Transient
        );
        assert_eq!(
            c.classify(&Failure::new("X")).class,
            FailureClass::PermanentTechnical
        );
    }

    #[test]
    fn timeouts_are_transient_by_default() {
        let c = RuleClassifier::default();
        let f = Failure::new(Reason::HANDLER_TIMEOUT);
        assert_eq!(c.classify(&f).class, FailureClass::Transient);
    }
}
