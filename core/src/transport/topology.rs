//! Who owns a broker's topology: the application, or operations.

use serde::Deserialize;

/// Whether a transport declares what it needs or only checks it exists.
///
/// Every broker transport reads it from `[transport] topology`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum TopologyMode {
    /// The application declares (creates) what it needs, idempotently.
    #[default]
    Declare,
    /// Operations own it: only passive checks; a missing piece is an error
    /// that names it.
    Verify,
}
