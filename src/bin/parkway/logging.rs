//! The binary's tracing subscriber (the library never installs one).
//!
//! Logs go to stderr so that stdout stays the command's output (a table or
//! JSON a script reads). By default only warnings and the redrive audit line
//! (`parkway::audit`) are shown. While a progress bar is drawn, each log line
//! is written with the bar suspended, so the two never overwrite each other.

use std::{
    io::{IsTerminal, Write},
    sync::{Mutex, PoisonError},
};

use indicatif::ProgressBar;

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

/// What is shown at each verbosity.
fn targets(verbose: u8) -> Targets {
    let level = match verbose {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        _ => LevelFilter::DEBUG,
    };
    // The AMQP client logs a channel closed by a failed passive check as an
    // error; the command's own error already says what is missing.
    let client = if verbose == 0 {
        LevelFilter::OFF
    } else {
        level
    };
    // lapin logs every returned message with its payload (at WARN); a
    // refused publish is reported by our own error, without the payload.
    Targets::new()
        .with_default(level)
        .with_target("lapin", client)
        .with_target("lapin::returned_messages", LevelFilter::OFF)
        .with_target("parkway::audit", LevelFilter::INFO.max(level))
}

/// Installs the subscriber: `verbose` 0 = warnings and the audit line,
/// 1 = info, 2+ = debug.
pub(crate) fn init(format: Format, verbose: u8) {
    let targets = targets(verbose);
    let registry = tracing_subscriber::registry().with(targets);
    let result = match format {
        Format::Human => registry
            .with(
                fmt::layer()
                    .with_writer(Line::default)
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_target(true),
            )
            .try_init(),
        Format::Json => registry
            .with(fmt::layer().json().with_writer(Line::default))
            .try_init(),
    };
    if let Err(e) = result {
        eprintln!("warning: logging not set up: {e}");
    }
}

/// The progress bar on screen, if any.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Shows log lines around `bar` until it is cleared with `None`.
pub(crate) fn set_bar(bar: Option<ProgressBar>) {
    *BAR.lock().unwrap_or_else(PoisonError::into_inner) = bar;
}

/// One log event, written to stderr in one piece when dropped.
#[derive(Default)]
struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let write = || {
            let _ = std::io::stderr().write_all(&self.0);
        };
        let bar = BAR.lock().unwrap_or_else(PoisonError::into_inner).clone();
        match bar {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::targets;

    #[test]
    fn payloads_of_returned_messages_are_never_logged() {
        for verbose in 0..4 {
            let t = targets(verbose);
            assert!(!t.would_enable("lapin::returned_messages", &Level::ERROR));
            assert!(t.would_enable("parkway::audit", &Level::INFO));
        }
        assert!(targets(1).would_enable("lapin::channel", &Level::INFO));
        assert!(!targets(0).would_enable("lapin::channel", &Level::ERROR));
    }
}
