//! From the file's shape to validated values, naming the field on error.

use std::sync::Arc;

use super::{
    Config, ConfigError, TransportConfig, WorkerConfig,
    raw::{RawBackoff, RawConfig, RawPolicy},
};
use crate::{
    backoff::{Backoff, Jitter, Strategy},
    envelope::EnvelopeLimits,
    failure::RuleClassifier,
    policy::RetryPolicy,
    worker::Router,
};

fn invalid(field: impl Into<String>, message: impl ToString) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.to_string(),
    }
}

pub(super) fn compile(raw: RawConfig) -> Result<Config, ConfigError> {
    if raw.transport.kind.trim().is_empty() {
        return Err(invalid(
            "transport.kind",
            "must name a transport, e.g. \"memory\"",
        ));
    }
    if raw.worker.concurrency == 0 {
        return Err(invalid("worker.concurrency", "must be at least 1"));
    }
    if raw.worker.handler_timeout.is_zero() {
        return Err(invalid(
            "worker.handler_timeout",
            "must be greater than zero",
        ));
    }
    let limits = EnvelopeLimits::new(raw.envelope.max_bytes, raw.envelope.max_error_bytes)
        .map_err(|e| invalid("envelope", e))?;
    let classifier = raw.classifier.reasons.into_iter().fold(
        RuleClassifier::new(raw.classifier.default),
        |c, (r, class)| c.with_rule(r, class),
    );
    let router = router(raw.policies, &raw.routes)?;
    Ok(Config {
        transport: TransportConfig {
            kind: raw.transport.kind,
            settings: raw.transport.settings,
        },
        worker: WorkerConfig {
            concurrency: raw.worker.concurrency,
            handler_timeout: raw.worker.handler_timeout,
            handler_version: raw.worker.handler_version,
        },
        limits,
        classifier,
        router,
    })
}

fn router(
    policies: std::collections::BTreeMap<String, RawPolicy>,
    routes: &std::collections::BTreeMap<String, String>,
) -> Result<Router, ConfigError> {
    let mut compiled = Vec::with_capacity(policies.len());
    for (name, raw) in policies {
        if name.trim().is_empty() {
            return Err(invalid("policies", "a policy name is empty"));
        }
        let policy = policy(&name, raw)?;
        compiled.push((name, policy));
    }
    let fallback = match routes.get("*") {
        Some(name) => name.clone(),
        None if compiled.len() == 1 => compiled[0].0.clone(),
        None if compiled.is_empty() => {
            return Err(invalid("policies", "define at least one policy"));
        }
        None => {
            return Err(invalid(
                "routes",
                "several policies but no \"*\" route: name the policy for messages on routes not listed",
            ));
        }
    };
    let Some(first) = compiled.iter().position(|(n, _)| *n == fallback) else {
        return Err(invalid(
            "routes.\"*\"",
            format!("names policy `{fallback}`, which is not defined"),
        ));
    };
    let (name, p) = compiled.swap_remove(first);
    let mut router = Router::new(name, p);
    for (name, p) in compiled {
        router = router.with_policy(name, p);
    }
    for (route, name) in routes.iter().filter(|(r, _)| r.as_str() != "*") {
        router = router
            .with_route(route.clone(), name)
            .map_err(|e| invalid(format!("routes.{route}"), e))?;
    }
    Ok(router)
}

fn policy(name: &str, raw: RawPolicy) -> Result<RetryPolicy, ConfigError> {
    let at = |field: &str| format!("policies.{name}.{field}");
    let mut b = RetryPolicy::builder();
    if let Some(n) = raw.local_attempts {
        b = b.local_attempts(n);
    }
    if let Some(lb) = raw.local_backoff {
        b = b.local_backoff(
            backoff(lb).map_err(|e| invalid(at(&format!("local_backoff.{}", e.field())), e))?,
        );
    }
    if let Some(n) = raw.max_attempts {
        b = b.max_attempts(n);
    }
    if let Some(d) = raw.max_age {
        b = b.max_age(d);
    }
    if let Some(d) = raw.max_total_delay {
        b = b.max_total_delay(d);
    }
    if let Some(bo) = raw.backoff {
        b = b.backoff(backoff(bo).map_err(|e| invalid(at(&format!("backoff.{}", e.field())), e))?);
    }
    if let Some(o) = raw.on_exhausted {
        b = b.on_exhausted(o);
    }
    if let Some(o) = raw.ordering {
        b = b.ordering(o);
    }
    b.park_on(raw.park_on)
        .discard_on(raw.discard_on)
        .build()
        .map_err(|e| invalid(at(e.field()), e))
}

fn backoff(raw: RawBackoff) -> Result<Backoff, crate::backoff::InvalidBackoff> {
    let (strategy, jitter, max) = match raw {
        RawBackoff::Fixed { delay, jitter, max } => (Strategy::Fixed(delay), jitter, max),
        RawBackoff::Linear {
            initial,
            step,
            jitter,
            max,
        } => (Strategy::Linear { initial, step }, jitter, max),
        RawBackoff::Exponential {
            initial,
            multiplier,
            jitter,
            max,
        } => (
            Strategy::Exponential {
                initial,
                multiplier,
            },
            jitter,
            max,
        ),
        RawBackoff::Fibonacci {
            initial,
            jitter,
            max,
        } => (Strategy::Fibonacci { initial }, jitter, max),
        RawBackoff::Schedule {
            delays,
            jitter,
            max,
        } => (
            Strategy::Schedule(delays.into_iter().map(|d| *d).collect::<Arc<[_]>>()),
            jitter,
            max,
        ),
    };
    Backoff::new(strategy, jitter.unwrap_or(Jitter::None), max)
}
