//! `parkway`: the operator's tool. It reads the same config file as the
//! workers, so every command talks to the broker (and the queues or topics)
//! that the workers use.
//!
//! One file per subcommand. A new broker-specific subcommand (e.g. `parkway
//! kafka …`) is a module with an `Args` type, a variant in [`Command`] and a
//! line in [`run`].
#![allow(clippy::print_stdout, clippy::print_stderr)] // a CLI prints

/// `println!` that ends the process quietly on a closed pipe (see `output`).
macro_rules! out {
    () => { $crate::output::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::write(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` that ends the process quietly on a closed pipe (see `output`).
macro_rules! out_raw {
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*)) };
}

mod check;
mod exit;
mod kafka;
mod logging;
mod output;
mod parked;
mod session;
mod topology;

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

use crate::exit::CliError;

/// Exit codes, also in `--help`.
const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  usage or config error (the message names the field or flag)
  2  broker error (unreachable, refused, timed out, topology missing)
  3  redrive stopped: the canary's messages failed again
  4  redrive finished with some moves failed (those messages stay parked)";

/// Parkway's operator tool: check a config, plan or apply its broker
/// topology, and list, inspect and redrive parked messages — the same way on
/// every transport, through the config file the workers use.
#[derive(Debug, Parser)]
#[command(name = "parkway", version, after_help = EXIT_CODES)]
struct Cli {
    /// Log format on stderr (the audit line of a redrive included).
    #[arg(long, global = true, value_enum, default_value_t = logging::Format::Human)]
    log_format: logging::Format,
    /// More logs on stderr: -v info, -vv debug.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

/// The config file every command reads.
#[derive(Debug, Clone, clap::Args)]
struct ConfigArg {
    /// The Parkway config file (the one the workers use).
    #[arg(long, short = 'c', value_name = "FILE")]
    config: PathBuf,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
enum Command {
    /// Validate a config and print the plan per policy (offline: no broker
    /// is contacted). Exits 1 naming the problem if a policy cannot work.
    Check(check::Args),
    /// What the transport declares on its broker: plan it, or apply it.
    #[command(subcommand)]
    Topology(topology::Command),
    /// Parked messages: list, show and redrive.
    #[command(subcommand)]
    Parked(parked::Command),
    /// Kafka pause-partition consumers halted by `on_exhausted = "halt"`:
    /// list the halts, resume one in place, or skip it to the dead-letter
    /// topic.
    #[command(subcommand)]
    Kafka(kafka::Command),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(exit::USAGE)
            } else {
                ExitCode::SUCCESS // --help, --version
            };
        }
    };
    logging::init(cli.log_format, cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::BROKER);
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.code())
        }
    }
}

/// Runs one command; `Ok` carries the exit code of a command that finished
/// (a redrive can finish and still report a canary abort).
async fn run(command: Command) -> Result<u8, CliError> {
    match command {
        Command::Check(args) => check::run(&args),
        Command::Topology(cmd) => topology::run(cmd).await,
        Command::Parked(cmd) => parked::run(cmd).await,
        Command::Kafka(cmd) => kafka::run(cmd).await,
    }
}
