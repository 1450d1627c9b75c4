//! # Parkway
//!
//! A broker-agnostic async retry engine: every failed message gets one
//! explicit, bounded, inspectable lifecycle — **classify → retry budget →
//! backoff with jitter → park → redrive** — whatever the broker.
//!
//! This facade re-exports [`parkway_core`] and turns a config file's
//! `[transport]` table into a transport with [`connect`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = parkway::config::Config::from_toml(r#"
//!     [transport]
//!     kind = "memory"
//!     queue = "orders"
//!     [policies.default]
//!     max_attempts = 3
//! "#)?;
//! let transport = parkway::connect(&config)?;
//! assert_eq!(transport.kind(), "memory");
//! # Ok(()) }
//! ```
#![doc(test(attr(deny(warnings))))]

pub use parkway_core::*;

use std::sync::Arc;

use parkway_core::{config::Config, memory::MemoryTransport};

/// The transport kinds this build can connect to.
pub const KINDS: &[&str] = &["memory"];

/// Why [`connect`] could not produce a transport.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// `[transport] kind` names a transport this build does not have.
    #[error("transport.kind: unknown transport {kind:?}; this build supports: {}", KINDS.join(", "))]
    UnknownKind {
        /// The kind from the file.
        kind: String,
    },
    /// A setting in `[transport]` is wrong.
    #[error("transport.{setting}: {why}")]
    Setting {
        /// The setting.
        setting: String,
        /// What is wrong.
        why: String,
    },
}

/// Builds the transport named by the config's `[transport]` table.
///
/// `memory` reads one optional setting, `queue` (default `"parkway"`).
pub fn connect(config: &Config) -> Result<Arc<dyn Transport>, ConnectError> {
    let t = &config.transport;
    match t.kind.as_str() {
        "memory" => {
            for key in t.settings.keys() {
                if key != "queue" {
                    return Err(ConnectError::Setting {
                        setting: key.clone(),
                        why: "not a setting of the memory transport (it has: queue)".into(),
                    });
                }
            }
            let queue = match t.settings.get("queue") {
                None => "parkway",
                Some(v) => v.as_str().ok_or_else(|| ConnectError::Setting {
                    setting: "queue".into(),
                    why: "must be a string".into(),
                })?,
            };
            Ok(Arc::new(MemoryTransport::new(queue)))
        }
        other => Err(ConnectError::UnknownKind {
            kind: other.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(transport: &str) -> Config {
        Config::from_toml(&format!("[transport]\n{transport}\n[policies.p]\n")).unwrap()
    }

    #[test]
    fn unknown_kinds_and_settings_are_named() {
        let e = connect(&config("kind = \"carrier-pigeon\"")).unwrap_err();
        assert!(e.to_string().contains("carrier-pigeon"), "{e}");
        let e = connect(&config("kind = \"memory\"\nqeueu = \"x\"")).unwrap_err();
        assert!(e.to_string().contains("transport.qeueu"), "{e}");
        let e = connect(&config("kind = \"memory\"\nqueue = 3")).unwrap_err();
        assert!(e.to_string().contains("transport.queue"), "{e}");
    }
}
