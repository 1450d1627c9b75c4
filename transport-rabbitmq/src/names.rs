//! The names of everything one work queue needs, derived in one place.

use std::time::Duration;

use crate::RabbitConfig;

/// Exchange, queues and routing key of one work queue's topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The work exchange (direct).
    pub exchange: String,
    /// The work queue.
    pub queue: String,
    /// The key binding the work queue to the work exchange.
    pub routing_key: String,
    /// The parking queue (no consumer).
    pub parking: String,
    wait_prefix: String,
}

impl Names {
    /// Names from the settings.
    pub fn new(c: &RabbitConfig) -> Self {
        Names {
            exchange: c.exchange.clone().unwrap_or_else(|| c.queue.clone()),
            queue: c.queue.clone(),
            routing_key: c.routing_key.clone().unwrap_or_else(|| c.queue.clone()),
            parking: c
                .parking_queue
                .clone()
                .unwrap_or_else(|| format!("{}.parking", c.queue)),
            wait_prefix: c
                .wait_prefix
                .clone()
                .unwrap_or_else(|| format!("{}.wait", c.queue)),
        }
    }

    /// The wait queue of a delay tier, e.g. `orders.wait.1500ms`.
    pub fn wait(&self, tier: Duration) -> String {
        format!("{}.{}ms", self.wait_prefix, tier.as_millis())
    }

    /// Whether `queue` is one of this topology's wait queues.
    pub fn is_wait(&self, queue: &str) -> bool {
        queue
            .strip_prefix(&self.wait_prefix)
            .and_then(|r| r.strip_prefix('.'))
            .is_some_and(|r| r.ends_with("ms"))
    }
}
