//! Parkway: a broker-agnostic async retry engine.
pub use parkway_core::*;
