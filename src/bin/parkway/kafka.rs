//! `parkway kafka halted|resume|skip-to-dlt`: operator actions on a
//! pause-partition consumer halted by `on_exhausted = "halt"`.
//!
//! The halted record lives in the memory of the worker holding its
//! partition, and Kafka lets no outsider commit for a live group. So these
//! commands go through the transport's control topic (`<topic>.control`):
//! `halted` reads the halts workers announced there, and `resume` /
//! `skip-to-dlt` write an action that the worker holding the partition
//! carries out and answers. The command waits for that answer, so its exit
//! code says whether the action really happened.

use std::time::Duration;

use crate::{ConfigArg, exit::CliError};

/// `parkway kafka` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Records halted by `on_exhausted = "halt"` that no operator has
    /// released yet (topic, partition, offset, reason, for how long).
    Halted(HaltedArgs),
    /// Run the halted record again, in place, with a fresh retry budget
    /// (after fixing what made it fail). Order is kept.
    Resume(ActionArgs),
    /// Park the halted record in the dead-letter topic with its envelope and
    /// let its partition go on. Breaks order for the record's key.
    SkipToDlt(ActionArgs),
}

/// `parkway kafka halted` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct HaltedArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// `table` or `json`.
    #[arg(long, short, value_enum, default_value_t = crate::parked::Output::Table)]
    output: crate::parked::Output,
}

/// Where the halted record is, and who acts.
#[derive(Debug, clap::Args)]
pub(crate) struct ActionArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Partition of the halted record (as `parkway kafka halted` shows it).
    #[arg(long)]
    partition: i32,
    /// Offset of the halted record (as `parkway kafka halted` shows it).
    #[arg(long)]
    offset: i64,
    /// Topic of the halted record (default: the config's source topic).
    #[arg(long)]
    topic: Option<String>,
    /// Who acts: written to the control topic and the worker's log.
    #[arg(long, value_name = "NAME")]
    operator: String,
    /// How long to wait for the worker's answer (`30s`, `2m`).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    wait: Duration,
}

/// Runs one `kafka` subcommand.
pub(crate) async fn run(command: Command) -> Result<u8, CliError> {
    #[cfg(feature = "kafka")]
    {
        match command {
            Command::Halted(args) => imp::halted(&args).await,
            Command::Resume(args) => imp::act(parkway::kafka::OperatorAction::Resume, &args).await,
            Command::SkipToDlt(args) => {
                imp::act(parkway::kafka::OperatorAction::SkipToDlt, &args).await
            }
        }
    }
    #[cfg(not(feature = "kafka"))]
    {
        let _ = command;
        Err(CliError::usage(
            "the kafka transport is not compiled in; build parkway with the `kafka` feature",
        ))
    }
}

#[cfg(feature = "kafka")]
mod imp {
    use std::path::Path;

    use parkway::{
        ErrorKind, RetryPolicy,
        kafka::{KafkaConfig, KafkaTransport, OperatorAction, TopologyMode},
    };

    use super::{ActionArgs, HaltedArgs};
    use crate::{exit, exit::CliError, parked::Output, session};

    /// Opens the config's Kafka transport without joining its group or
    /// declaring anything (verify mode, no delay tiers).
    async fn open(path: &Path) -> Result<KafkaTransport, CliError> {
        let config = session::load(path)?;
        if config.transport.kind != "kafka" {
            return Err(CliError::usage(format!(
                "{}: transport.kind is {:?}; `parkway kafka` acts on Kafka pause-partition consumers only",
                path.display(),
                config.transport.kind
            )));
        }
        let mut settings = KafkaConfig::from_settings(&config.transport.settings)
            .map_err(|e| CliError::transport(&path.display().to_string(), &e))?;
        settings.topology = TopologyMode::Verify;
        let once = RetryPolicy::builder()
            .max_attempts(1)
            .build()
            .map_err(|e| CliError::usage(e.to_string()))?;
        KafkaTransport::connect(settings, [&once])
            .await
            .map_err(|e| {
                CliError::transport(
                    &format!(
                        "cannot open the Kafka topics of {} (operator commands never create topics: has a worker run?)",
                        path.display()
                    ),
                    &e,
                )
            })
    }

    pub(super) async fn halted(args: &HaltedArgs) -> Result<u8, CliError> {
        let t = open(&args.config.config).await?;
        let halts = t
            .announced_halts()
            .await
            .map_err(|e| CliError::transport("cannot read the control topic", &e));
        t.close().await;
        let halts = halts?;
        match args.output {
            Output::Json => {
                let rows: Vec<serde_json::Value> = halts
                    .iter()
                    .map(|h| {
                        serde_json::json!({
                            "topic": h.topic,
                            "partition": h.partition,
                            "offset": h.offset,
                            "reason": h.reason,
                            "halted_for_secs": h.halted_for.as_secs(),
                        })
                    })
                    .collect();
                out!("{}", serde_json::Value::Array(rows));
            }
            Output::Table => {
                if halts.is_empty() {
                    out!("no halted partitions");
                }
                for h in &halts {
                    out!("{h}");
                }
                if let Some(h) = halts.first() {
                    out!(
                        "\nact with: parkway kafka resume|skip-to-dlt --config {} --partition {} --offset {} --operator NAME",
                        args.config.config.display(),
                        h.partition,
                        h.offset
                    );
                }
            }
        }
        Ok(exit::OK)
    }

    pub(super) async fn act(action: OperatorAction, args: &ActionArgs) -> Result<u8, CliError> {
        let t = open(&args.config.config).await?;
        let topic = args.topic.clone().unwrap_or_else(|| t.topic());
        let answer = t
            .request(
                action,
                (&topic, args.partition, args.offset),
                &args.operator,
                args.wait,
            )
            .await;
        t.close().await;
        match answer {
            Ok(report) => {
                out!("{report}");
                tracing::info!(target: "parkway::audit", %action, %topic, partition = args.partition, offset = args.offset, operator = %args.operator, "operator action applied");
                Ok(exit::OK)
            }
            // The worker holding the partition refused: nothing is halted
            // there (wrong partition or offset, or already released).
            Err(e) if e.kind() == ErrorKind::Refused => Err(CliError::usage(format!(
                "{action} refused by the worker: {}",
                e
            ))),
            Err(e) => Err(CliError::transport(&format!("{action}"), &e)),
        }
    }
}
