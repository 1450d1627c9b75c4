//! What an SQS config would declare, worked out without AWS or an emulator
//! (`parkway check`, `parkway topology plan`).
//!
//! Why a separate, pure function? An operator checks a config before any
//! worker runs, often where the queues cannot be reached. It reads the same
//! receive count, ordering check and capabilities as
//! [`crate::SqsTransport::connect`] (shared functions, not copies), so the
//! plan shown is what the transport creates (declare mode) or checks
//! (verify mode).

use parkway_core::{RetryPolicy, TopologyMode, TransportError, transport::TopologyPlan};

use crate::{
    KIND, MAX_RECEIVE_COUNT, MAX_VISIBILITY, RetryMode, SqsConfig,
    topology::{DLQ_RETENTION_SECS, max_receive_count},
    transport::{capabilities, check_ordering},
};

/// The queues and capabilities `config` gets for `policies`; an error names
/// the setting that is wrong (an ordered policy on a standard queue too).
///
/// ```
/// use parkway_core::RetryPolicy;
/// let config = parkway_sqs::SqsConfig::new("orders");
/// let p = RetryPolicy::builder().max_attempts(4).build().unwrap();
/// let plan = parkway_sqs::plan(&config, [&p]).unwrap();
/// assert!(plan.declares.iter().any(|l| l.contains("`orders-dlq`")));
/// assert!(plan.declares.iter().any(|l| l.contains("maxReceiveCount 9")));
/// ```
pub fn plan<'a>(
    config: &SqsConfig,
    policies: impl IntoIterator<Item = &'a RetryPolicy>,
) -> Result<TopologyPlan, TransportError> {
    config.validate()?;
    let policies: Vec<&RetryPolicy> = policies.into_iter().collect();
    let ordered = check_ordering(config, &policies)?;
    // As `SqsTransport::connect` reckons it: no policy counts as one attempt.
    let max_attempts = policies.iter().map(|p| p.max_attempts()).max().unwrap_or(1);
    let receives = max_receive_count(config, max_attempts);
    let capped = if max_attempts.saturating_add(config.receive_margin) > MAX_RECEIVE_COUNT {
        format!(", capped at SQS's {MAX_RECEIVE_COUNT}")
    } else {
        String::new()
    };
    let (queue, dlq) = (config.queue_name(), config.dead_letter_queue_name());
    let flavour = if config.is_fifo() { "FIFO" } else { "standard" };
    let declares = vec![
        format!(
            "queue `{dlq}` ({flavour}{}): the dead-letter queue (parking lot), retention {} days (SQS's longest); RedriveAllowPolicy byQueue admits only `{queue}`",
            by_url(config.dead_letter_queue.as_deref()),
            DLQ_RETENTION_SECS / 86_400,
        ),
        format!(
            "queue `{queue}` ({flavour}{}): the source queue, visibility timeout {}; RedrivePolicy to `{dlq}` with maxReceiveCount {receives} (largest max_attempts {max_attempts} + receive_margin {}{capped}): the crash safety net",
            by_url(Some(&config.queue)),
            humantime::format_duration(config.visibility_timeout),
            config.receive_margin,
        ),
    ];
    let mut notes = vec![
        format!(
            "region {}, endpoint {}, credentials {} (topology = \"{}\")",
            config
                .region
                .as_deref()
                .map_or("from the standard AWS chain".to_owned(), |r| format!(
                    "`{r}`"
                )),
            config
                .endpoint
                .as_deref()
                .map_or("AWS's own".to_owned(), |e| format!(
                    "`{}`",
                    without_userinfo(e)
                )),
            match config.credentials {
                crate::CredentialSource::Emulator => "placeholder keys (emulators only)",
                _ => "from the standard AWS chain",
            },
            topology(config.topology),
        ),
        match config.retry_mode {
            RetryMode::Resend => format!(
                "retry: resend — a copy with DelaySeconds (whole seconds), then the original deleted; delays up to {}",
                humantime::format_duration(config.max_delay())
            ),
            _ => format!(
                "retry: visibility — ChangeMessageVisibility on the received message (whole seconds); delays up to {} ({} less one visibility timeout)",
                humantime::format_duration(config.max_delay()),
                humantime::format_duration(MAX_VISIBILITY)
            ),
        },
        if ordered {
            "mode: FIFO ordered — the failing head of a message group is retried in place; other groups flow".to_owned()
        } else if config.is_fifo() {
            "mode: FIFO queue, unordered policies — a retry waits out of line; message groups keep their order otherwise".to_owned()
        } else {
            "mode: standard queue — no order (an ordered policy needs a `.fifo` queue)".to_owned()
        },
        format!(
            "consumer: {} long poll(s) of 10, at most {} message(s) in flight, leases renewed while a handler runs",
            config.pollers, config.max_in_flight
        ),
    ];
    if config.topology == TopologyMode::Verify {
        notes.push(format!(
            "verify mode creates nothing: both queues must exist and `{queue}` must dead-letter to `{dlq}` with a maxReceiveCount above {max_attempts}"
        ));
    }
    Ok(TopologyPlan {
        kind: KIND,
        declares,
        notes,
        capabilities: capabilities(config),
    })
}

/// A queue given as a URL is looked up, never created.
fn by_url(queue: Option<&str>) -> &'static str {
    match queue {
        Some(q) if q.contains("://") => ", given by URL: looked up, not created",
        _ => "",
    }
}

/// An endpoint URL without any `user:password@` part.
pub(crate) fn without_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
                None => url.to_owned(),
            }
        }
        None => url.to_owned(),
    }
}

fn topology(mode: TopologyMode) -> &'static str {
    match mode {
        TopologyMode::Verify => "verify",
        _ => "declare",
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use parkway_core::{Backoff, Capabilities, DelayMode};

    fn policy(max_attempts: u32) -> RetryPolicy {
        RetryPolicy::builder()
            .max_attempts(max_attempts)
            .build()
            .unwrap()
    }

    #[test]
    fn the_receive_count_is_the_largest_budget_plus_the_margin_capped() {
        let mut c = SqsConfig::new("orders");
        c.receive_margin = 7;
        let plan = plan(&c, [&policy(3), &policy(12)]).unwrap();
        let source = &plan.declares[1];
        assert!(
            source.contains("maxReceiveCount 19 (largest max_attempts 12 + receive_margin 7)"),
            "{source}"
        );
        let plan = super::plan(&c, [&policy(999)]).unwrap();
        assert!(
            plan.declares[1].contains("maxReceiveCount 1000")
                && plan.declares[1].contains("capped"),
            "{}",
            plan.declares[1]
        );
    }

    #[test]
    fn fifo_names_and_an_ordered_policy_on_a_standard_queue() {
        let ordered = RetryPolicy::builder()
            .ordering(parkway_core::Ordering::Ordered)
            .build()
            .unwrap();
        let e = plan(&SqsConfig::new("ledger"), [&ordered]).unwrap_err();
        assert!(e.to_string().contains("`ledger.fifo`"), "{e}");
        let p = plan(&SqsConfig::new("ledger.fifo"), [&ordered]).unwrap();
        assert!(
            p.declares[0].contains("`ledger-dlq.fifo` (FIFO"),
            "{:?}",
            p.declares
        );
        assert!(p.notes.concat().contains("FIFO ordered"), "{:?}", p.notes);
        assert!(p.capabilities.ordered);
    }

    #[test]
    fn the_retry_mode_sets_the_longest_delay() {
        let mut c = SqsConfig::new("orders");
        c.retry_mode = RetryMode::Resend;
        let p = plan(&c, [&policy(3)]).unwrap();
        assert_eq!(
            p.capabilities,
            Capabilities {
                max_delay: Some(crate::MAX_SEND_DELAY),
                delay_mode: DelayMode::Exact {
                    granularity: Duration::from_secs(2)
                },
                ordered: false,
                native_redrive: true,
                halts_in_place: false,
            }
        );
        assert!(p.notes.concat().contains("retry: resend"), "{:?}", p.notes);
        let slow = RetryPolicy::builder()
            .backoff(Backoff::fixed(Duration::from_secs(3600)))
            .build()
            .unwrap();
        assert!(p.capabilities.check(KIND, "slow", &slow).is_err());
    }

    #[test]
    fn notes_name_the_endpoint_without_userinfo_and_verify_mode() {
        let mut c = SqsConfig::new("http://127.0.0.1:4566/000000000000/orders");
        c.endpoint = Some("http://user:secret@127.0.0.1:4566".into());
        c.region = Some("eu-west-1".into());
        c.topology = TopologyMode::Verify;
        let p = plan(&c, [&policy(3)]).unwrap();
        let notes = p.notes.concat();
        assert!(
            notes.contains("`http://127.0.0.1:4566`") && !notes.contains("secret"),
            "{notes}"
        );
        assert!(
            notes.contains("`eu-west-1`") && notes.contains("verify mode"),
            "{notes}"
        );
        assert!(p.declares[1].contains("given by URL"), "{:?}", p.declares);
    }
}
