//! The binary's tracing subscriber (the library never installs one).
//!
//! Logs go to stderr so that stdout stays the command's output (a table or
//! JSON a script reads). By default only warnings and the redrive audit line
//! (`parkway::audit`) are shown.

use std::io::IsTerminal;

use tracing::level_filters::LevelFilter;
use tracing_subscriber::{filter::Targets, fmt, layer::SubscriberExt, util::SubscriberInitExt};

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// One readable line per event.
    Human,
    /// One JSON object per event.
    Json,
}

/// Installs the subscriber: `verbose` 0 = warnings and the audit line,
/// 1 = info, 2+ = debug.
pub(crate) fn init(format: Format, verbose: u8) {
    let level = match verbose {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        _ => LevelFilter::DEBUG,
    };
    let targets = Targets::new()
        .with_default(level)
        .with_target("parkway::audit", LevelFilter::INFO.max(level));
    let registry = tracing_subscriber::registry().with(targets);
    let result = match format {
        Format::Human => registry
            .with(
                fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_target(true),
            )
            .try_init(),
        Format::Json => registry
            .with(fmt::layer().json().with_writer(std::io::stderr))
            .try_init(),
    };
    if let Err(e) = result {
        eprintln!("warning: logging not set up: {e}");
    }
}
