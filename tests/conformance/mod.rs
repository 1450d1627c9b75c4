//! The conformance suite: the lifecycle scenarios, written once and run
//! against every transport. A transport's test file implements [`Broker`]
//! and invokes [`conformance_suite!`].

#![allow(
    dead_code,
    unreachable_pub,
    missing_docs,
    missing_debug_implementations
)]

pub mod harness;
pub mod lifecycle;
pub mod ordered;
pub mod redrive;
pub mod script;

pub use harness::{Broker, Publish, Queue};

/// A scenario's result where a transport may not support it by design.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// Stated in the transport's capabilities; reported, not hidden.
    Unsupported(&'static str),
}

/// Runs a scenario that may be unsupported, and reports it if so.
pub fn report(broker: &str, scenario: &str, outcome: Outcome) {
    if let Outcome::Unsupported(why) = outcome {
        eprintln!("conformance: {broker}: {scenario}: UNSUPPORTED BY DESIGN: {why}");
    }
}

/// Generates one `#[tokio::test]` per scenario for a broker constructor.
#[macro_export]
macro_rules! conformance_suite {
    ($broker:expr) => {
        $crate::conformance_suite!(@plain $broker;
            success_is_acked_once,
            transient_three_times_then_success,
            permanent_reason_parks_on_attempt_one,
            transient_forever_parks_after_max_attempts,
            max_age_parks_with_attempts_left,
            discard_and_duplicate_are_acked_not_parked,
            poison_flood_does_not_starve_healthy_messages,
            garbage_headers_never_crash_or_buy_retries,
        );

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn filtered_redrive_moves_only_matches() {
            let b = $broker;
            conformance::redrive::filtered_redrive_moves_only_matches(&b).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn ordered_mode_keeps_order_per_lane() {
            let b = $broker;
            let outcome = conformance::ordered::ordered_mode_keeps_order_per_lane(&b).await;
            conformance::report(
                conformance::Broker::name(&b),
                "ordered_mode_keeps_order_per_lane",
                outcome,
            );
        }
    };
    (@plain $broker:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let b = $broker;
                conformance::lifecycle::$name(&b).await;
            }
        )+
    };
}
