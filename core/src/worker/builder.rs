//! Configuring a [`Worker`], validated (and the plan checked) in `build`.

use std::{sync::Arc, time::Duration};

use super::{Counters, Ctx, Handler, Router, Step, Worker, WorkerError};
use crate::{
    backoff::{Dice, ThreadDice},
    clock::{Clock, TokioClock},
    envelope::EnvelopeLimits,
    failure::{Classifier, RuleClassifier},
    policy::RetryPolicy,
    transport::Transport,
};

/// Builder for [`Worker`].
pub struct WorkerBuilder<H> {
    transport: Arc<dyn Transport>,
    handler: H,
    router: Router,
    classifier: Arc<dyn Classifier>,
    clock: Arc<dyn Clock>,
    dice: Arc<dyn Dice>,
    limits: EnvelopeLimits,
    concurrency: usize,
    handler_timeout: Duration,
    early_hold_limit: Duration,
    handler_version: Option<String>,
    observer: Option<super::Observer>,
}

impl<H> std::fmt::Debug for WorkerBuilder<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("transport", &self.transport.kind())
            .field("router", &self.router)
            .field("concurrency", &self.concurrency)
            .field("handler_timeout", &self.handler_timeout)
            .finish_non_exhaustive()
    }
}

impl<H: Handler> WorkerBuilder<H> {
    pub(super) fn new(transport: Arc<dyn Transport>, handler: H) -> Self {
        WorkerBuilder {
            transport,
            handler,
            router: Router::new("default", RetryPolicy::default()),
            classifier: Arc::new(RuleClassifier::default()),
            clock: Arc::new(TokioClock::new()),
            dice: Arc::new(ThreadDice),
            limits: EnvelopeLimits::default(),
            concurrency: 16,
            handler_timeout: Duration::from_secs(30),
            early_hold_limit: Duration::from_secs(2),
            handler_version: None,
            observer: None,
        }
    }

    /// Applies a loaded config file: policies and routes, classifier,
    /// envelope limits and worker settings.
    #[must_use]
    pub fn config(mut self, config: &crate::config::Config) -> Self {
        self.router = config.router.clone();
        self.classifier = Arc::new(config.classifier.clone());
        self.limits = config.limits;
        self.concurrency = config.worker.concurrency;
        self.handler_timeout = config.worker.handler_timeout;
        self.handler_version
            .clone_from(&config.worker.handler_version);
        self
    }

    /// Uses one policy for every route.
    #[must_use]
    pub fn policy(mut self, policy: RetryPolicy) -> Self {
        self.router = Router::new("default", policy);
        self
    }

    /// Uses a route → policy mapping.
    #[must_use]
    pub fn router(mut self, router: Router) -> Self {
        self.router = router;
        self
    }

    /// Classifies failures (default: [`RuleClassifier::default`]).
    #[must_use]
    pub fn classifier(mut self, c: impl Classifier + 'static) -> Self {
        self.classifier = Arc::new(c);
        self
    }

    /// The wall clock (default: [`TokioClock`]).
    #[must_use]
    pub fn clock(mut self, c: Arc<dyn Clock>) -> Self {
        self.clock = c;
        self
    }

    /// The jitter dice (default: [`ThreadDice`]).
    #[must_use]
    pub fn dice(mut self, d: Arc<dyn Dice>) -> Self {
        self.dice = d;
        self
    }

    /// Envelope byte limits.
    #[must_use]
    pub fn envelope_limits(mut self, l: EnvelopeLimits) -> Self {
        self.limits = l;
        self
    }

    /// Messages handled at once (default 16).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Longest a handler may run (default 30 s); then `HANDLER_TIMEOUT`.
    #[must_use]
    pub fn handler_timeout(mut self, d: Duration) -> Self {
        self.handler_timeout = d;
        self
    }

    /// A retry delivered before its due time (tiered delays round down)
    /// waits in process for the rest, if that is at most this long
    /// (default 2 s). Longer gaps (clock skew, a forged header) are not
    /// waited for.
    #[must_use]
    pub fn early_hold_limit(mut self, d: Duration) -> Self {
        self.early_hold_limit = d;
        self
    }

    /// Recorded in the envelope of failed messages.
    #[must_use]
    pub fn handler_version(mut self, v: impl Into<String>) -> Self {
        self.handler_version = Some(v.into());
        self
    }

    /// Called for every handler outcome and decision (for drills, demos and
    /// tests; keep it cheap).
    #[must_use]
    pub fn observer(mut self, f: impl Fn(&Step) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(f));
        self
    }

    /// Validates the settings and checks every policy against the
    /// transport's capabilities. The per-message metric handles are
    /// registered here: install a `metrics` recorder before building.
    pub fn build(self) -> Result<Worker<H>, WorkerError> {
        if self.concurrency == 0 {
            return Err(WorkerError::Setting {
                setting: "concurrency",
                why: "must be at least 1",
            });
        }
        if self.handler_timeout.is_zero() {
            return Err(WorkerError::Setting {
                setting: "handler_timeout",
                why: "must be greater than zero",
            });
        }
        let caps = self.transport.capabilities();
        let kind = self.transport.kind();
        let mut plans = self
            .router
            .policies()
            .map(|p| caps.check(kind, &p.name, &p.policy))
            .collect::<Result<Vec<_>, _>>()?;
        plans.sort_by(|a, b| a.policy.cmp(&b.policy));
        for plan in &plans {
            tracing::info!(transport = kind, %plan, "policy plan");
        }
        for line in self.transport.describe() {
            tracing::info!(transport = kind, "{line}");
        }
        Ok(Worker {
            ctx: Ctx {
                meters: super::meters::Meters::new(self.transport.kind()),
                transport: self.transport,
                handler: self.handler,
                router: self.router,
                classifier: self.classifier,
                clock: self.clock,
                dice: self.dice,
                limits: self.limits,
                handler_timeout: self.handler_timeout,
                early_hold_limit: self.early_hold_limit,
                handler_version: self.handler_version,
                observer: self.observer,
                counters: Counters::default(),
            },
            concurrency: self.concurrency,
            plans,
        })
    }
}
