//! Loading the config file and connecting to its transport.
//!
//! Broker commands refuse the memory transport with an explanation rather
//! than a fake answer: its queue and parking lot live inside the worker's
//! process, so another process has nothing to read.
//!
//! The `parked` commands open the transport in verify mode and without the
//! policies' delay tiers: an operator command never declares anything, so a
//! misspelt queue or topic is an error naming it, not a new empty lot.

use std::{path::Path, sync::Arc};

use parkway::{RetryPolicy, Transport, config::Config, worker::Router};

use crate::exit::CliError;

/// Loads and validates the config file; errors name the field.
pub(crate) fn load(path: &Path) -> Result<Config, CliError> {
    Config::load(path).map_err(|e| match e {
        parkway::config::ConfigError::Io { .. } => CliError::usage(e.to_string()),
        _ => CliError::usage(format!("{}: {e}", path.display())),
    })
}

/// Refuses the memory transport for a command that needs a broker.
pub(crate) fn needs_broker(config: &Config, path: &Path, what: &str) -> Result<(), CliError> {
    if config.transport.kind == "memory" {
        return Err(CliError::usage(format!(
            "{}: transport.kind is \"memory\": the in-memory queue and its parking lot live inside the worker's process, so another process has nothing to {what}. \
             Use the worker's own API (`transport.parking_lot()`, `parkway::redrive::redrive`), or a broker transport (rabbitmq, kafka, sqs) in the config",
            path.display()
        )));
    }
    Ok(())
}

/// Connects to the config's broker as a worker would (declare mode declares
/// idempotently; verify mode only checks).
pub(crate) async fn connect(config: &Config, path: &Path) -> Result<Arc<dyn Transport>, CliError> {
    parkway::connect(config).await.map_err(|e| {
        CliError::connect(
            &format!(
                "cannot open the {} transport of {}",
                config.transport.kind,
                path.display()
            ),
            &e,
        )
    })
}

/// Connects to the config's parking lot without declaring anything: verify
/// mode, and one single-attempt policy (so no delay tiers are checked — they
/// are the workers' business, and a parking lot does not need them).
pub(crate) async fn connect_lot(
    config: &Config,
    path: &Path,
) -> Result<Arc<dyn Transport>, CliError> {
    let mut checked = config.clone();
    checked.transport.settings.insert(
        "topology".to_owned(),
        toml::Value::String("verify".to_owned()),
    );
    let once = RetryPolicy::builder()
        .max_attempts(1)
        .build()
        .map_err(|e| CliError::usage(e.to_string()))?;
    checked.router = Router::new("operator", once);
    parkway::connect(&checked).await.map_err(|e| {
        CliError::connect(
            &format!(
                "cannot open the parking lot of {} ({} transport; operator commands check, never declare: are the names right, and has a worker run?)",
                path.display(),
                config.transport.kind,
            ),
            &e,
        )
    })
}
