//! `parkway parked list` and `show`: browse the parking lot without
//! consuming or reordering anything.

use std::time::SystemTime;

use parkway::Parked;

use super::{
    filter::FilterArgs,
    view::{self, Output},
};
use crate::{ConfigArg, exit, exit::CliError, session};

/// `parkway parked list` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigArg,
    #[command(flatten)]
    filter: FilterArgs,
    /// Read at most this many parked messages (oldest first).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    scan: usize,
    /// `table` or `json`.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    output: Output,
}

/// `parkway parked show` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Only the message with this message id or parked id.
    #[arg(value_name = "ID")]
    id: Option<String>,
    #[command(flatten)]
    filter: FilterArgs,
    /// Read at most this many parked messages (oldest first).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    scan: usize,
    /// Print the bodies too (they may hold personal data).
    #[arg(long)]
    body: bool,
    /// `table` or `json`.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    output: Output,
}

/// Reads the lot and keeps what the filter selects; returns the matches
/// and how many messages were read.
async fn browse(
    config_arg: &ConfigArg,
    filter: &FilterArgs,
    scan: usize,
    what: &str,
) -> Result<(Vec<Parked>, usize), CliError> {
    let path = &config_arg.config;
    let config = session::load(path)?;
    let filter = filter.filter(SystemTime::now())?;
    session::needs_broker(&config, path, what)?;
    let transport = session::connect_lot(&config, path).await?;
    let all = transport
        .parking_lot()
        .browse(scan)
        .await
        .map_err(|e| CliError::transport("cannot read the parking lot", &e))?;
    let scanned = all.len();
    Ok((
        all.into_iter().filter(|p| filter.matches(p)).collect(),
        scanned,
    ))
}

/// Prints the table or JSON.
pub(crate) async fn list(args: &Args) -> Result<u8, CliError> {
    let (parked, scanned) = browse(&args.config, &args.filter, args.scan, "list").await?;
    let now = SystemTime::now();
    match args.output {
        Output::Table => out_raw!("{}", view::table(&parked, scanned, now)),
        Output::Json => out!("{}", view::json_list(&parked, scanned, now)),
    }
    Ok(exit::OK)
}

/// Prints every detail of the matching messages.
pub(crate) async fn show(args: &ShowArgs) -> Result<u8, CliError> {
    let (mut parked, _) = browse(&args.config, &args.filter, args.scan, "show").await?;
    if let Some(id) = &args.id {
        parked.retain(|p| {
            p.id == *id
                || p.message.id.as_deref() == Some(id)
                || p.envelope.message_id.as_deref() == Some(id)
        });
        if parked.is_empty() {
            return Err(CliError::usage(format!(
                "no parked message with message id or parked id {id:?} matches"
            )));
        }
    }
    let now = SystemTime::now();
    match args.output {
        Output::Table => {
            for p in &parked {
                out!("{}", view::detail(p, now, args.body));
            }
            out!("{} parked message(s)", parked.len());
        }
        Output::Json => {
            let all: Vec<_> = parked
                .iter()
                .map(|p| view::json_one(p, now, true, args.body))
                .collect();
            out!("{}", serde_json::Value::Array(all));
        }
    }
    Ok(exit::OK)
}
