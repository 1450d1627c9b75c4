//! Pieces the broker benchmarks share: the delay-precision workload and its
//! report. The benchmarks themselves live in `benches/`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use parkway_core::{Backoff, Envelope, Failure, Handler, Jitter, Message, RetryPolicy, Strategy};

/// Retries per message in the precision workload.
pub const RETRIES: usize = 6;

/// Exponential 100 ms ×2 with ±20 % jitter, capped at 5 s; eight attempts.
pub fn precision_policy() -> RetryPolicy {
    let backoff = Backoff::new(
        Strategy::Exponential {
            initial: Duration::from_millis(100),
            multiplier: 2.0,
        },
        Jitter::Proportional(0.2),
        Some(Duration::from_secs(5)),
    )
    .unwrap_or_else(|_| Backoff::fixed(Duration::from_millis(100)));
    RetryPolicy::builder()
        .max_attempts(8)
        .backoff(backoff)
        .build()
        .unwrap_or_default()
}

/// One handler run: started, returned, and the delay decided before it.
type Run = (Instant, Instant, Option<Duration>);

/// Fails each message [`RETRIES`] times, recording when every run started
/// and ended and which delay the engine decided before it.
#[derive(Debug, Clone, Default)]
pub struct Timing {
    runs: Arc<Mutex<HashMap<String, Vec<Run>>>>,
}

impl Handler for Timing {
    async fn handle(&self, m: &Message) -> Result<(), Failure> {
        let started = Instant::now();
        let decided = Envelope::decode(&m.headers).last_delay;
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let v = runs.entry(m.id.clone().unwrap_or_default()).or_default();
        v.push((started, Instant::now(), decided));
        if v.len() <= RETRIES {
            Err(Failure::transient("DOWNSTREAM_TIMEOUT"))
        } else {
            Ok(())
        }
    }
}

impl Timing {
    /// Whether `n` messages have all run to success.
    pub fn complete(&self, n: usize) -> bool {
        let r = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        r.len() == n && r.values().all(|v| v.len() == RETRIES + 1)
    }

    /// (decided delay, |time from failure to next run − decided delay|).
    pub fn samples(&self) -> Vec<(Duration, Duration)> {
        let r = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for v in r.values() {
            for pair in v.windows(2) {
                if let Some(d) = pair[1].2 {
                    out.push((d, (pair[1].0 - pair[0].1).abs_diff(d)));
                }
            }
        }
        out
    }
}

/// p50 / p99 / max of the error and the share over max(25 ms, 2 %).
pub fn precision_report(mut samples: Vec<(Duration, Duration)>) -> Vec<String> {
    if samples.is_empty() {
        return vec!["delay error    no samples".into()];
    }
    samples.sort_by_key(|s| s.1);
    let pct = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)].1;
    let over = samples
        .iter()
        .filter(|(d, e)| *e > Duration::from_millis(25).max(d.mul_f64(0.02)))
        .count();
    let mut lines = vec![
        format!(
            "delay error    p50 {:?}  p99 {:?}  max {:?}",
            pct(0.5),
            pct(0.99),
            pct(1.0)
        ),
        format!(
            "delay error    over max(25 ms, 2 %): {over} of {} ({:.2} %)  (goal: p99 within)",
            samples.len(),
            over as f64 * 100.0 / samples.len() as f64
        ),
    ];
    // By delay, to tell a slow start (the first, shortest delays) from a
    // slow tier.
    for (lo, hi) in [(0, 250), (250, 1000), (1000, 10_000)] {
        let (lo, hi) = (Duration::from_millis(lo), Duration::from_millis(hi));
        let mut bucket: Vec<Duration> = samples
            .iter()
            .filter(|(d, _)| *d >= lo && *d < hi)
            .map(|s| s.1)
            .collect();
        if bucket.is_empty() {
            continue;
        }
        bucket.sort();
        let at = |p: f64| bucket[((bucket.len() as f64 * p) as usize).min(bucket.len() - 1)];
        lines.push(format!(
            "delay error    delays {lo:?}–{hi:?}: {} samples, p50 {:?}  p99 {:?}",
            bucket.len(),
            at(0.5),
            at(0.99)
        ));
    }
    lines
}

/// A whole-number setting from the environment (`_` separators allowed),
/// or `default` when unset; a value that does not parse stops the bench
/// with a message naming the variable, rather than silently measuring
/// something else.
pub fn env_or(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v.trim().replace('_', "").parse().unwrap_or_else(|_| {
            eprintln!("{name}={v:?} is not a positive whole number");
            std::process::exit(2)
        }),
        Err(_) => default,
    }
}

/// The median of a round's rates (the upper one of an even count; 0 for
/// none).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// CPU time the process's threads have used, per thread (Linux
/// `/proc/self/task/*/schedstat`, nanoseconds). Throughput against a broker
/// on the same two cores swings with the broker's fetch timing; CPU time per
/// record does not, so the benches print both.
pub fn cpu_snapshot() -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        if let Some(ns) = stat.split_whitespace().next().and_then(|v| v.parse().ok()) {
            out.insert(task.file_name().to_string_lossy().into_owned(), ns);
        }
    }
    out
}

/// CPU time used since `before`, per thread name (librdkafka's `rdk:*`
/// threads, tokio's workers, ...), most first: where a loop's time goes.
pub fn cpu_by_thread_name(before: &HashMap<String, u64>) -> Vec<(String, Duration)> {
    let mut by: HashMap<String, u64> = HashMap::new();
    for (tid, now) in cpu_snapshot() {
        let name = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
            .map(|n| n.trim().to_owned())
            .unwrap_or_else(|_| "?".to_owned());
        *by.entry(name).or_default() += now.saturating_sub(before.get(&tid).copied().unwrap_or(0));
    }
    let mut out: Vec<_> = by
        .into_iter()
        .map(|(name, ns)| (name, Duration::from_nanos(ns)))
        .collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.1));
    out
}

/// CPU time used since `before` by the threads alive now (a thread that
/// ended in between is not counted; none of the measured phases ends one).
pub fn cpu_since(before: &HashMap<String, u64>) -> Duration {
    let ns: u64 = cpu_snapshot()
        .iter()
        .map(|(tid, now)| now.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum();
    Duration::from_nanos(ns)
}
