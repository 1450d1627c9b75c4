//! Which policy applies to which message.
//!
//! Different message types deserve different budgets (seed 000 §18): a CRM
//! sync can retry for a day, an order command for two hours. The router maps
//! a message's route to a named policy, with a fallback so that no message is
//! ever without one.

use std::{collections::HashMap, sync::Arc};

use crate::policy::RetryPolicy;

/// A policy and its name (named in logs, errors and plans).
#[derive(Debug, Clone, PartialEq)]
pub struct NamedPolicy {
    /// The policy's name in config.
    pub name: String,
    /// The policy.
    pub policy: RetryPolicy,
}

/// A route that names a policy that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("route `{route}` names policy `{policy}`, which is not defined")]
pub struct UnknownPolicy {
    route: String,
    policy: String,
}

/// Route → policy, with a fallback.
///
/// ```
/// use parkway_core::{RetryPolicy, worker::Router};
/// let router = Router::new("default", RetryPolicy::default())
///     .with_policy("slow", RetryPolicy::builder().max_attempts(12).build().unwrap())
///     .with_route("crm.sync", "slow").unwrap();
/// assert_eq!(router.route("crm.sync").name, "slow");
/// assert_eq!(router.route("anything.else").name, "default");
/// ```
#[derive(Debug, Clone)]
pub struct Router {
    policies: HashMap<String, Arc<NamedPolicy>>,
    routes: HashMap<String, Arc<NamedPolicy>>,
    fallback: Arc<NamedPolicy>,
}

impl Router {
    /// A router whose fallback (and first policy) is `name`.
    pub fn new(name: impl Into<String>, policy: RetryPolicy) -> Self {
        let fallback = Arc::new(NamedPolicy {
            name: name.into(),
            policy,
        });
        Router {
            policies: HashMap::from([(fallback.name.clone(), fallback.clone())]),
            routes: HashMap::new(),
            fallback,
        }
    }

    /// Adds a named policy.
    #[must_use]
    pub fn with_policy(mut self, name: impl Into<String>, policy: RetryPolicy) -> Self {
        let name = name.into();
        let named = Arc::new(NamedPolicy {
            name: name.clone(),
            policy,
        });
        if self.fallback.name == name {
            self.fallback = named.clone();
        }
        self.policies.insert(name, named);
        self
    }

    /// Sends messages on `route` to the policy named `policy`.
    pub fn with_route(
        mut self,
        route: impl Into<String>,
        policy: &str,
    ) -> Result<Self, UnknownPolicy> {
        let route = route.into();
        let Some(named) = self.policies.get(policy) else {
            return Err(UnknownPolicy {
                route,
                policy: policy.to_owned(),
            });
        };
        self.routes.insert(route, named.clone());
        Ok(self)
    }

    /// Sets which policy applies to routes with no mapping.
    pub fn with_fallback(mut self, policy: &str) -> Result<Self, UnknownPolicy> {
        let Some(named) = self.policies.get(policy) else {
            return Err(UnknownPolicy {
                route: "*".to_owned(),
                policy: policy.to_owned(),
            });
        };
        self.fallback = named.clone();
        Ok(self)
    }

    /// The policy for a route.
    pub fn route(&self, route: &str) -> &Arc<NamedPolicy> {
        self.routes.get(route).unwrap_or(&self.fallback)
    }

    /// Every policy, for the start-up plan.
    pub fn policies(&self) -> impl Iterator<Item = &NamedPolicy> {
        self.policies.values().map(Arc::as_ref)
    }
}
