//! The metric handles the worker touches for every message, registered
//! once when it is built.
//!
//! Why not the `metrics` macros at each call? With a label taken at run
//! time (the transport's name) each call builds a key and allocates its
//! label list before the recorder even sees it; on the happy path that was
//! two allocations per message for two numbers. The handles are registered
//! with the recorder installed when the worker is built, so install it
//! (e.g. the Prometheus exporter) before building, as `metrics` advises.

use metrics::{Counter, Histogram};

/// Outcomes counted under `parkway_messages_total`, by `outcome` label.
const OUTCOMES: [&str; 7] = [
    "acked",
    "retried",
    "parked",
    "discarded",
    "duplicate",
    "halted",
    "unsettled",
];

pub(super) struct Meters {
    kind: &'static str,
    pub(super) handler_duration: Histogram,
    outcomes: [Counter; OUTCOMES.len()],
}

impl Meters {
    pub(super) fn new(kind: &'static str) -> Self {
        Meters {
            kind,
            handler_duration: metrics::histogram!("parkway_handler_duration_seconds", "transport" => kind),
            outcomes: OUTCOMES.map(
                |outcome| metrics::counter!("parkway_messages_total", "transport" => kind, "outcome" => outcome),
            ),
        }
    }

    /// Counts one message settled with `outcome`.
    pub(super) fn settled(&self, outcome: &'static str) {
        match OUTCOMES.iter().position(|o| *o == outcome) {
            Some(i) => self.outcomes[i].increment(1),
            None => {
                metrics::counter!("parkway_messages_total", "transport" => self.kind, "outcome" => outcome)
                    .increment(1);
            }
        }
    }
}

impl std::fmt::Debug for Meters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meters")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use metrics_util::debugging::DebuggingRecorder;

    use super::*;

    #[test]
    fn outcomes_land_on_their_labelled_counter() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            let m = Meters::new("memory");
            m.settled("acked");
            m.settled("acked");
            m.settled("unsettled");
            m.settled("something-new");
        });
        let counts: Vec<(String, u64)> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter_map(|(key, _, _, value)| {
                let outcome = key
                    .key()
                    .labels()
                    .find(|l| l.key() == "outcome")?
                    .value()
                    .to_owned();
                match value {
                    metrics_util::debugging::DebugValue::Counter(n) if n > 0 => Some((outcome, n)),
                    _ => None,
                }
            })
            .collect();
        let get = |o: &str| counts.iter().find(|(k, _)| k == o).map(|(_, n)| *n);
        assert_eq!(get("acked"), Some(2));
        assert_eq!(get("unsettled"), Some(1));
        assert_eq!(
            get("something-new"),
            Some(1),
            "an unlisted outcome is still counted"
        );
        assert_eq!(get("parked"), None);
    }
}
