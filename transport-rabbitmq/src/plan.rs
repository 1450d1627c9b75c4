//! What a RabbitMQ config would declare, worked out without a broker
//! (`parkway check`, `parkway topology plan`).
//!
//! It reads the same [`Names`] and [`TierPlan`] as
//! [`crate::RabbitTransport::connect`], so the plan shown is the topology the
//! transport builds: the fixed part at connect, the wait queues when a retry
//! first needs one (or all at once with
//! [`crate::RabbitTransport::declare_wait_queues`]).

use std::time::Duration;

use parkway_core::{
    Capabilities, DelayMode, ErrorKind, Ordering, RetryPolicy, TransportError,
    transport::TopologyPlan,
};

use crate::{KIND, Names, QueueType, RabbitConfig, TierPlan, TopologyMode};

/// The topology and capabilities `config` gets for `policies`; an error
/// names the setting or the plan that cannot work (too many wait queues).
///
/// ```
/// use parkway_core::{Backoff, RetryPolicy};
/// let config = parkway_rabbitmq::RabbitConfig::new("amqp://guest:secret@h/%2f", "orders");
/// let p = RetryPolicy::builder().max_attempts(3)
///     .backoff(Backoff::fixed(std::time::Duration::from_secs(2))).build().unwrap();
/// let plan = parkway_rabbitmq::plan(&config, [&p]).unwrap();
/// assert!(plan.declares.iter().any(|l| l.contains("orders.wait.2000ms")));
/// assert!(!plan.notes.concat().contains("secret"));
/// ```
pub fn plan<'a>(
    config: &RabbitConfig,
    policies: impl IntoIterator<Item = &'a RetryPolicy>,
) -> Result<TopologyPlan, TransportError> {
    config.validate()?;
    let policies: Vec<&RetryPolicy> = policies.into_iter().collect();
    let tiers = TierPlan::for_policies(policies.iter().copied())
        .map_err(|e| TransportError::new(KIND, ErrorKind::Config, e.to_string()))?;
    let ordered = policies.iter().any(|p| p.ordering() == Ordering::Ordered);
    let n = Names::new(config);
    let kind = match config.queue_type {
        QueueType::Quorum => "quorum",
        _ => "classic",
    };
    let mut work = format!(
        "queue `{}` ({kind}, durable): the work queue, bound with key `{}`; dead-letters to `{}`",
        n.queue, n.routing_key, n.parking
    );
    if ordered {
        work.push_str("; single active consumer");
    }
    if let Some(limit) = config.delivery_limit {
        work.push_str(&format!("; delivery limit {limit}"));
    }
    let mut declares = vec![
        format!(
            "exchange `{}` (direct, durable): the work exchange",
            n.exchange
        ),
        work,
        format!(
            "queue `{}` ({kind}, durable): the parking lot, no consumer",
            n.parking
        ),
    ];
    declares.extend(tiers.tiers().iter().map(|t| {
        format!(
            "queue `{}` ({kind}, durable): wait tier {}, x-message-ttl {} ms, dead-letters to `{}` --{}--> `{}`; declared on first use",
            n.wait(*t),
            humantime::format_duration(*t),
            t.as_millis(),
            n.exchange,
            n.routing_key,
            n.queue
        )
    }));
    let notes = vec![
        format!(
            "broker {} (topology = \"{}\")",
            config.redacted_url(),
            topology(config.topology)
        ),
        format!(
            "delays: {} wait tier(s); a delay goes to the tier below it and the worker waits out the rest (at most {}), else the nearest tier (within {}%)",
            tiers.tiers().len(),
            humantime::format_duration(crate::HOLD_CAP),
            tiers.max_error_percent()
        ),
        if ordered {
            "consumer: single active, prefetch 1, retries in place (ordered)".to_owned()
        } else {
            format!("consumer: prefetch {}", config.prefetch)
        },
    ];
    let longest = tiers.tiers().last().copied().unwrap_or(Duration::ZERO);
    Ok(TopologyPlan {
        kind: KIND,
        declares,
        notes,
        // As `RabbitTransport::capabilities` states them.
        capabilities: Capabilities {
            max_delay: Some(longest.mul_f64(1.02) + Duration::from_millis(25)),
            delay_mode: DelayMode::Tiered {
                max_error_percent: tiers.max_error_percent(),
            },
            ordered: true,
            native_redrive: false,
            halts_in_place: false,
        },
    })
}

fn topology(mode: TopologyMode) -> &'static str {
    match mode {
        TopologyMode::Verify => "verify",
        _ => "declare",
    }
}
