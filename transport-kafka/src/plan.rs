//! What a Kafka config would create, worked out without a broker
//! (`parkway check`, `parkway topology plan`).
//!
//! It reads the same [`TierPlan`] and topic names as
//! [`crate::KafkaTransport::connect`], so the plan shown is what the
//! transport creates (declare mode) or checks (verify mode).

use std::time::Duration;

use parkway_core::{
    Capabilities, DelayMode, Ordering, RetryPolicy, TransportError, transport::TopologyPlan,
};

use crate::{KIND, KafkaConfig, MAX_DELAY, TierPlan, TopologyMode, admin};

/// The topics and capabilities `config` gets for `policies`; an error names
/// the setting that is wrong.
///
/// ```
/// use parkway_core::RetryPolicy;
/// let config = parkway_kafka::KafkaConfig::new("127.0.0.1:9092", "ledger", "txns");
/// let plan = parkway_kafka::plan(&config, [&RetryPolicy::default()]).unwrap();
/// assert!(plan.declares.iter().any(|l| l.contains("`txns.dlt`")));
/// ```
pub fn plan<'a>(
    config: &KafkaConfig,
    policies: impl IntoIterator<Item = &'a RetryPolicy>,
) -> Result<TopologyPlan, TransportError> {
    config.validate()?;
    let policies: Vec<&RetryPolicy> = policies.into_iter().collect();
    let tiers = TierPlan::for_policies(policies.iter().copied());
    let ordered = policies.iter().any(|p| p.ordering() == Ordering::Ordered);
    let mut declares = vec![format!(
        "topic `{}`: the source topic — not created here, it must exist (its producers own it); the topics below get its partition count",
        config.topic
    )];
    for (topic, compacted) in admin::derived_topics(config, &tiers) {
        let role = if compacted {
            "the replay index (compacted): dead-letter records already replayed".to_owned()
        } else if topic == config.dlt() {
            "the dead-letter topic (parking lot)".to_owned()
        } else if topic == config.control_topic() {
            "the control topic: operator resume / skip-to-dlt for a halted partition".to_owned()
        } else {
            "a retry tier: records carry their due time and are held until then".to_owned()
        };
        declares.push(format!("topic `{topic}`: {role}"));
    }
    let notes = vec![
        format!(
            "brokers {}, consumer group `{}` (topology = \"{}\")",
            config.bootstrap_servers,
            config.group_id,
            topology(config.topology)
        ),
        if ordered {
            "mode: pause-partition — one record in flight per partition, a failure retried in place"
                .to_owned()
        } else {
            "mode: retry topics — a retry goes to the tier topic of its delay".to_owned()
        },
    ];
    Ok(TopologyPlan {
        kind: KIND,
        declares,
        notes,
        // As `KafkaTransport::capabilities` states them.
        capabilities: Capabilities {
            max_delay: Some(MAX_DELAY),
            delay_mode: DelayMode::Exact {
                granularity: Duration::from_millis(5),
            },
            ordered: true,
            native_redrive: false,
            halts_in_place: true,
        },
    })
}

fn topology(mode: TopologyMode) -> &'static str {
    match mode {
        TopologyMode::Verify => "verify",
        _ => "declare",
    }
}
