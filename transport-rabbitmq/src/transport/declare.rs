//! Declaring every wait queue up front (`parkway topology apply`).
//!
//! Why? The transport declares a wait queue when a retry first needs it, so
//! a fresh topology holds only the work and parking queues. A team that runs
//! its workers with `topology = "verify"` needs every piece to exist before
//! the first worker starts; this is how operations creates them.

use parkway_core::TransportError;

use super::RabbitTransport;

impl RabbitTransport {
    /// Declares the wait queue of every delay tier now, each at most once,
    /// and returns their names. In `verify` mode nothing is declared: the
    /// queues were checked at connect.
    pub async fn declare_wait_queues(&self) -> Result<Vec<String>, TransportError> {
        let inner = &self.inner;
        let link = inner.link().await?;
        let mut names = Vec::with_capacity(inner.plan.tiers().len());
        for tier in inner.plan.tiers() {
            inner.ensure_wait(&link, *tier).await?;
            names.push(inner.names.wait(*tier));
        }
        Ok(names)
    }
}
