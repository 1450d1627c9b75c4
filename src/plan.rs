//! The offline side of [`crate::connect`]: what a config's transport would
//! build and offer, and whether every policy fits it — without a broker.
//!
//! Why here? The same `[transport] kind` dispatch as `connect`, so `parkway
//! check` and `parkway topology plan` can never disagree with what a worker
//! started from the same file does.

use parkway_core::{
    PlanError, PolicyPlan, Transport, config::Config, memory::MemoryTransport,
    transport::TopologyPlan,
};

use crate::{ConnectError, KINDS};

/// The topology and capabilities the config's transport would get, worked
/// out without contacting a broker.
///
/// ```
/// let config = parkway::config::Config::from_toml(
///     "[transport]\nkind = \"memory\"\n[policies.p]\nmax_attempts = 3\n",
/// ).unwrap();
/// let plan = parkway::plan(&config).unwrap();
/// assert_eq!(plan.kind, "memory");
/// assert!(parkway::check_policies(&config, &plan).is_ok());
/// ```
pub fn plan(config: &Config) -> Result<TopologyPlan, ConnectError> {
    let t = &config.transport;
    #[cfg(any(feature = "rabbitmq", feature = "kafka", feature = "sqs"))]
    let policies: Vec<&parkway_core::RetryPolicy> =
        config.router.policies().map(|p| &p.policy).collect();
    match t.kind.as_str() {
        "memory" => {
            let queue = crate::memory_queue(t)?;
            Ok(TopologyPlan {
                kind: "memory",
                declares: Vec::new(),
                notes: vec![
                    format!("in-process queue `{queue}`: nothing is declared on any broker"),
                    "delays: timers in the worker's process; the parking lot lives in the worker's memory and ends with it".to_owned(),
                ],
                capabilities: MemoryTransport::new(queue).capabilities(),
            })
        }
        #[cfg(feature = "rabbitmq")]
        "rabbitmq" => {
            let settings = parkway_rabbitmq::RabbitConfig::from_settings(&t.settings)?;
            Ok(parkway_rabbitmq::plan(&settings, policies)?)
        }
        #[cfg(feature = "kafka")]
        "kafka" => {
            let settings = parkway_kafka::KafkaConfig::from_settings(&t.settings)?;
            Ok(parkway_kafka::plan(&settings, policies)?)
        }
        #[cfg(feature = "sqs")]
        "sqs" => {
            let settings = parkway_sqs::SqsConfig::from_settings(&t.settings)?;
            Ok(parkway_sqs::plan(&settings, policies)?)
        }
        other => Err(crate::not_known(other)),
    }
}

/// Checks every policy of `config` against the plan's capabilities, sorted
/// by policy name; the first policy that cannot work is the error.
pub fn check_policies(config: &Config, plan: &TopologyPlan) -> Result<Vec<PolicyPlan>, PlanError> {
    let mut plans = config
        .router
        .policies()
        .map(|p| plan.capabilities.check(plan.kind, &p.name, &p.policy))
        .collect::<Result<Vec<_>, _>>()?;
    plans.sort_by(|a, b| a.policy.cmp(&b.policy));
    Ok(plans)
}

/// The transport kinds compiled into this build.
pub fn compiled_kinds() -> Vec<&'static str> {
    KINDS
        .iter()
        .filter(|(_, feature)| match feature {
            None => true,
            Some("rabbitmq") => cfg!(feature = "rabbitmq"),
            Some("kafka") => cfg!(feature = "kafka"),
            Some("sqs") => cfg!(feature = "sqs"),
            Some(_) => false,
        })
        .map(|(kind, _)| *kind)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_kinds_follow_the_features() {
        let kinds = compiled_kinds();
        assert!(kinds.contains(&"memory"));
        assert_eq!(kinds.contains(&"rabbitmq"), cfg!(feature = "rabbitmq"));
        assert_eq!(kinds.contains(&"kafka"), cfg!(feature = "kafka"));
        assert_eq!(kinds.contains(&"sqs"), cfg!(feature = "sqs"));
    }

    #[cfg(feature = "sqs")]
    #[test]
    fn sqs_is_planned_offline_from_the_transport_table() {
        let config = Config::from_toml(
            "[transport]\nkind = \"sqs\"\nqueue = \"orders.fifo\"\n[policies.p]\nmax_attempts = 6\nordering = \"ordered\"\n",
        )
        .unwrap();
        let plan = plan(&config).unwrap();
        assert_eq!(plan.kind, "sqs");
        assert!(
            plan.declares
                .iter()
                .any(|l| l.contains("`orders-dlq.fifo`") && l.contains("(FIFO")),
            "{:?}",
            plan.declares
        );
        assert!(
            plan.declares
                .iter()
                .any(|l| l.contains("maxReceiveCount 11"))
        );
        assert!(check_policies(&config, &plan).is_ok());
    }

    #[cfg(not(feature = "sqs"))]
    #[test]
    fn sqs_not_compiled_in_names_its_feature() {
        let config =
            Config::from_toml("[transport]\nkind = \"sqs\"\nqueue = \"orders\"\n[policies.p]\n")
                .unwrap();
        let e = plan(&config).unwrap_err();
        assert!(e.to_string().contains("`sqs` feature"), "{e}");
    }
}
