//! A transport's plan, worked out from the config alone.
//!
//! Why without a broker? An operator wants to see what a config would
//! declare, which delays it gets and how precise they are — and to have an
//! impossible plan refused — before anything touches a broker: in review, in
//! CI, on a laptop. Each transport offers a pure function that reads its
//! settings and the policies and returns this.

use super::Capabilities;

/// What a transport would build for a config, and what it would offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyPlan {
    /// The transport kind.
    pub kind: &'static str,
    /// The broker topology, one line per piece (exchange, queue, topic) with
    /// its role: what a connect in declare mode creates, or verify mode
    /// checks.
    pub declares: Vec<String>,
    /// Other facts of the plan (consumer mode, delay handling, limits).
    pub notes: Vec<String>,
    /// The capabilities the connected transport will state.
    pub capabilities: Capabilities,
}
