//! `parkway check`: validate a config and print its plan, offline.
//!
//! Why offline? A config is reviewed before it is deployed, often where no
//! broker is reachable (CI, a laptop). Everything `check` prints comes from
//! the config alone through [`parkway::plan`] — the same planning the
//! transport does at connect — so an impossible plan is caught here, with
//! the policy's name, rather than when the first message reaches that step.

use parkway::{DelayMode, PolicyPlan, RetryPolicy, config::Config, transport::TopologyPlan};

use crate::{ConfigArg, exit, exit::CliError, session};

/// `parkway check` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigArg,
}

/// Validates and prints; exit 1 names the field or policy that is wrong.
pub(crate) fn run(args: &Args) -> Result<u8, CliError> {
    let path = &args.config.config;
    let config = session::load(path)?;
    let plan = parkway::plan(&config)
        .map_err(|e| CliError::connect(&format!("{}: transport", path.display()), &e))?;
    let policies = parkway::check_policies(&config, &plan)
        .map_err(|e| CliError::usage(format!("{}: impossible plan: {e}", path.display())))?;
    out!("{}: valid", path.display());
    out!();
    print_transport(&plan);
    out!();
    for p in &policies {
        print_policy(&config, p);
    }
    Ok(exit::OK)
}

fn print_transport(plan: &TopologyPlan) {
    let caps = &plan.capabilities;
    out!("transport {}", plan.kind);
    for line in &plan.notes {
        out!("  {line}");
    }
    for line in &plan.declares {
        out!("  topology: {line}");
    }
    out!(
        "  capabilities: longest delay {}, {}, ordered mode {}, native redrive {}, halts in place {}",
        caps.max_delay.map_or_else(
            || "unlimited".to_owned(),
            |d| humantime::format_duration(d).to_string()
        ),
        precision(caps.delay_mode),
        yes_no(caps.ordered),
        yes_no(caps.native_redrive),
        yes_no(caps.halts_in_place),
    );
}

fn print_policy(config: &Config, plan: &PolicyPlan) {
    let Some(named) = config.router.policies().find(|p| p.name == plan.policy) else {
        return;
    };
    let p: &RetryPolicy = &named.policy;
    out!("policy `{}`", plan.policy);
    out!(
        "  attempts: {} local × {} broker; max age {}; max total delay {}; when spent: {}; ordering: {}",
        p.local_attempts(),
        p.max_attempts(),
        p.max_age()
            .map_or("none".to_owned(), |d| humantime::format_duration(d)
                .to_string()),
        p.max_total_delay()
            .map_or("none".to_owned(), |d| humantime::format_duration(d)
                .to_string()),
        p.on_exhausted(),
        p.ordering(),
    );
    let b = p.backoff();
    let delays: Vec<String> = (1..p.max_attempts())
        .take(8)
        .map(|n| {
            let (lo, hi) = b.bounds(n, None);
            if lo == hi {
                fmt_ms(lo)
            } else {
                format!("{}–{}", fmt_ms(lo), fmt_ms(hi))
            }
        })
        .collect();
    let more = if p.max_attempts() > 9 { ", …" } else { "" };
    out!(
        "  delays before retries 1..: {}{more} (jitter {})",
        if delays.is_empty() {
            "none (one attempt)".to_owned()
        } else {
            delays.join(", ")
        },
        b.jitter()
    );
    let codes = |r: &[parkway::Reason]| {
        if r.is_empty() {
            "-".to_owned()
        } else {
            r.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ")
        }
    };
    out!(
        "  park at once on: {}; discard on: {}",
        codes(p.park_on()),
        codes(p.discard_on())
    );
    out!(
        "  precision: longest delay {}, {}",
        humantime::format_duration(plan.longest_delay),
        precision(plan.delay_mode)
    );
}

fn precision(mode: DelayMode) -> String {
    match mode {
        DelayMode::Exact { granularity } => {
            format!("exact to {}", humantime::format_duration(granularity))
        }
        DelayMode::Tiered { max_error_percent } => {
            format!("tiered, within {max_error_percent}%")
        }
        _ => "unstated precision".to_owned(),
    }
}

fn fmt_ms(d: std::time::Duration) -> String {
    humantime::format_duration(std::time::Duration::from_millis(
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
    ))
    .to_string()
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
