//! `parkway parked list|show|redrive`: the parking lot of the config's
//! broker.
//!
//! Every command connects to the broker named in the config and reads the
//! real parking lot (RabbitMQ parking queue, Kafka dead-letter topic, SQS
//! dead-letter queue);
//! browsing never consumes or reorders anything. The filters are the same
//! for all three commands, so what `list` shows is what `redrive` moves.

mod filter;
mod list;
mod progress;
mod redrive;
mod view;

pub(crate) use view::Output;

use crate::exit::CliError;

/// `parkway parked` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// A table of parked messages grouped and counted by reason (reason,
    /// class, attempts, age, message id, origin); `--output json` for
    /// scripts.
    List(list::Args),
    /// Every detail of the matching parked messages: the envelope, the
    /// headers and (with `--body`) the body.
    Show(list::ShowArgs),
    /// Move matching parked messages back to their origin: filtered, dry
    /// run, limit, rate, canary; audited (replay headers and an audit log
    /// line), with a final report and exit codes scripts can trust.
    Redrive(redrive::Args),
}

/// Runs one `parked` subcommand.
pub(crate) async fn run(command: Command) -> Result<u8, CliError> {
    match command {
        Command::List(args) => list::list(&args).await,
        Command::Show(args) => list::show(&args).await,
        Command::Redrive(args) => redrive::run(&args).await,
    }
}
