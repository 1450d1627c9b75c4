//! What the broker-agnostic examples share: opening the transport a config
//! names (plus a producer to feed it), the message-driven handler, and
//! watching outcomes per message.
#![allow(dead_code, unreachable_pub)] // each example uses a part

pub mod broker;
pub mod handler;
pub mod outcomes;
