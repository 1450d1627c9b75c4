//! The file's shape, as serde reads it. Validation happens in `compile`.

use std::{collections::BTreeMap, time::Duration};

use serde::Deserialize;

use crate::{
    backoff::Jitter,
    failure::{FailureClass, Reason},
    policy::{OnExhausted, Ordering},
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) transport: RawTransport,
    #[serde(default)]
    pub(super) worker: RawWorker,
    #[serde(default)]
    pub(super) envelope: RawEnvelope,
    #[serde(default)]
    pub(super) classifier: RawClassifier,
    pub(super) policies: BTreeMap<String, RawPolicy>,
    #[serde(default)]
    pub(super) routes: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawTransport {
    pub(super) kind: String,
    #[serde(flatten)]
    pub(super) settings: toml::Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawWorker {
    pub(super) concurrency: usize,
    #[serde(with = "humantime_serde")]
    pub(super) handler_timeout: Duration,
    pub(super) handler_version: Option<String>,
}

impl Default for RawWorker {
    fn default() -> Self {
        RawWorker {
            concurrency: 16,
            handler_timeout: Duration::from_secs(30),
            handler_version: None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawEnvelope {
    pub(super) max_bytes: usize,
    pub(super) max_error_bytes: usize,
}

impl Default for RawEnvelope {
    fn default() -> Self {
        let d = crate::envelope::EnvelopeLimits::default();
        RawEnvelope {
            max_bytes: d.max_bytes(),
            max_error_bytes: d.max_error_bytes(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClassifier {
    #[serde(default = "unknown")]
    pub(super) default: FailureClass,
    #[serde(default)]
    pub(super) reasons: BTreeMap<Reason, FailureClass>,
}

fn unknown() -> FailureClass {
    FailureClass::Unknown
}

impl Default for RawClassifier {
    fn default() -> Self {
        RawClassifier {
            default: FailureClass::Unknown,
            reasons: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) local_attempts: Option<u32>,
    pub(super) local_backoff: Option<RawBackoff>,
    pub(super) max_attempts: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub(super) max_age: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) max_total_delay: Option<Duration>,
    pub(super) backoff: Option<RawBackoff>,
    #[serde(default)]
    pub(super) park_on: Vec<Reason>,
    #[serde(default)]
    pub(super) discard_on: Vec<Reason>,
    pub(super) on_exhausted: Option<OnExhausted>,
    pub(super) ordering: Option<Ordering>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub(super) enum RawBackoff {
    Fixed {
        #[serde(with = "humantime_serde")]
        delay: Duration,
        jitter: Option<Jitter>,
        #[serde(default, with = "humantime_serde")]
        max: Option<Duration>,
    },
    Linear {
        #[serde(with = "humantime_serde")]
        initial: Duration,
        #[serde(with = "humantime_serde")]
        step: Duration,
        jitter: Option<Jitter>,
        #[serde(default, with = "humantime_serde")]
        max: Option<Duration>,
    },
    Exponential {
        #[serde(with = "humantime_serde")]
        initial: Duration,
        #[serde(default = "two")]
        multiplier: f64,
        jitter: Option<Jitter>,
        #[serde(default, with = "humantime_serde")]
        max: Option<Duration>,
    },
    Fibonacci {
        #[serde(with = "humantime_serde")]
        initial: Duration,
        jitter: Option<Jitter>,
        #[serde(default, with = "humantime_serde")]
        max: Option<Duration>,
    },
    Schedule {
        delays: Vec<humantime_serde::Serde<Duration>>,
        jitter: Option<Jitter>,
        #[serde(default, with = "humantime_serde")]
        max: Option<Duration>,
    },
}

fn two() -> f64 {
    2.0
}
