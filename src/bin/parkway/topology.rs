//! `parkway topology plan|apply`: what the transport declares on its broker.
//!
//! `plan` changes nothing and needs no broker: it prints the pieces a
//! connect in declare mode creates, from the same planning the transport
//! uses. `apply` connects exactly as a worker would — declare mode creates
//! what is missing, idempotently; verify mode only checks and names what is
//! missing — and, on RabbitMQ, also declares every wait queue that workers
//! would otherwise declare on first use.

use std::path::Path;

use parkway::config::Config;

use crate::{ConfigArg, exit, exit::CliError, session};

/// `parkway topology` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Print what would be declared (exchanges, queues, topics); changes
    /// nothing and contacts no broker.
    Plan(ConfigArg),
    /// Declare it on the broker named in the config (or, with topology =
    /// "verify", check that it exists).
    Apply(ConfigArg),
}

/// Runs `plan` or `apply`.
pub(crate) async fn run(command: Command) -> Result<u8, CliError> {
    match command {
        Command::Plan(args) => plan(&args.config),
        Command::Apply(args) => apply(&args.config).await,
    }
}

fn plan(path: &Path) -> Result<u8, CliError> {
    let config = session::load(path)?;
    let plan = parkway::plan(&config)
        .map_err(|e| CliError::connect(&format!("{}: transport", path.display()), &e))?;
    out!(
        "{} transport ({}) — plan only, nothing changed:",
        plan.kind,
        mode(&config)
    );
    if plan.declares.is_empty() {
        out!("  nothing to declare");
    }
    for line in &plan.declares {
        out!("  {line}");
    }
    for line in &plan.notes {
        out!("  note: {line}");
    }
    Ok(exit::OK)
}

async fn apply(path: &Path) -> Result<u8, CliError> {
    let config = session::load(path)?;
    if config.transport.kind == "memory" {
        out!("memory transport: nothing to declare (the queue lives inside each worker's process)");
        return Ok(exit::OK);
    }
    #[cfg(feature = "rabbitmq")]
    if config.transport.kind == "rabbitmq" {
        return apply_rabbitmq(&config, path).await;
    }
    let transport = session::connect(&config, path).await?;
    print_applied(&config, transport.kind(), &transport.describe(), &[]);
    Ok(exit::OK)
}

/// RabbitMQ declares wait queues on first use; `apply` declares them all.
#[cfg(feature = "rabbitmq")]
async fn apply_rabbitmq(config: &Config, path: &Path) -> Result<u8, CliError> {
    use parkway::Transport as _;
    let settings = parkway::rabbitmq::RabbitConfig::from_settings(&config.transport.settings)
        .map_err(|e| CliError::transport(&format!("{}: transport", path.display()), &e))?;
    let policies = config.router.policies().map(|p| &p.policy);
    let rabbit = parkway::rabbitmq::RabbitTransport::connect(settings, policies)
        .await
        .map_err(|e| {
            CliError::transport(
                &format!("cannot open the rabbitmq transport of {}", path.display()),
                &e,
            )
        })?;
    let declared = rabbit.declare_wait_queues().await;
    let describe = rabbit.describe();
    rabbit.close().await;
    let waits = declared.map_err(|e| CliError::transport("cannot declare the wait queues", &e))?;
    print_applied(config, rabbit.kind(), &describe, &waits);
    Ok(exit::OK)
}

fn print_applied(config: &Config, kind: &str, describe: &[String], waits: &[String]) {
    out!(
        "{kind} transport ({}): topology in place on the broker",
        mode(config)
    );
    for line in describe {
        out!("  {line}");
    }
    for q in waits {
        out!("  wait queue `{q}`: in place");
    }
}

fn mode(config: &Config) -> String {
    match config
        .transport
        .settings
        .get("topology")
        .and_then(|v| v.as_str())
    {
        Some(m) => format!("topology = \"{m}\""),
        None if config.transport.kind == "memory" => "in process".to_owned(),
        None => "topology = \"declare\"".to_owned(),
    }
}
