//! Decoding arbitrary headers must never panic, and what it yields must
//! re-encode within the byte budget and decode back to the same rule inputs.
//!
//! The input is text (lossy UTF-8), one header per line, so seeds and crash
//! inputs can be read and written by hand:
//!
//! ```text
//! @broker=3                 the broker's own delivery count (else none)
//! @now=1735689600           "now" in seconds since the Unix epoch
//! %0=5                      known header number 0 (x-parkway-attempt) = "5"
//! x-parkway-class=transient a header by its raw name
//! content-type              a header with an empty value
//! ```
//!
//! `%N` picks `KNOWN[N % (KNOWN.len() + 1)]`, the last slot being a
//! prefixed name the codec does not know, so the fuzzer reaches every header
//! without having to guess its name. Later lines win over earlier ones with
//! the same name. A value cannot contain a newline (other control characters
//! are fine).
#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use parkway_core::envelope::{HEADER_PREFIX, names};
use parkway_core::{Envelope, EnvelopeLimits, Headers};

/// Every header name the codec reads or writes.
const KNOWN: &[&str] = &[
    names::ATTEMPT,
    names::FIRST_FAILURE_AT,
    names::LAST_FAILURE_AT,
    names::TOTAL_DELAY_MS,
    names::LAST_DELAY_MS,
    names::CLASS,
    names::REASON,
    names::MESSAGE_ID,
    names::ORIGIN_QUEUE,
    names::ORIGIN_PARTITION,
    names::ORIGIN_OFFSET,
    names::CORRELATION_ID,
    names::MESSAGE_TYPE,
    names::REPLAY_ID,
    names::REPLAYED_BY,
    names::REPLAY_REASON,
    names::ORIGINAL_ATTEMPTS,
    names::HANDLER_VERSION,
    names::LAST_ERROR,
];

/// A prefixed name the codec does not know: `encode` must drop it.
const UNKNOWN: &str = "x-parkway-unknown";

/// "now" when the input names none: 2025-01-01T00:00:00Z.
const DEFAULT_NOW_SECS: u64 = 1_735_689_600;

#[derive(Debug)]
struct Input {
    broker_attempts: Option<u32>,
    now: SystemTime,
    headers: Headers,
}

fn parse(data: &[u8]) -> Input {
    let text = String::from_utf8_lossy(data);
    let mut broker_attempts = None;
    let mut now = UNIX_EPOCH + Duration::from_secs(DEFAULT_NOW_SECS);
    let mut pairs: Vec<(String, String)> = Vec::new();
    for line in text.split('\n') {
        if line.is_empty() {
            continue;
        }
        let (name, value) = line.split_once('=').unwrap_or((line, ""));
        match name {
            "@broker" => broker_attempts = value.trim().parse::<u32>().ok(),
            "@now" => {
                if let Some(t) = value
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .and_then(|s| UNIX_EPOCH.checked_add(Duration::from_secs(s)))
                {
                    now = t;
                }
            }
            _ => {
                let name = match name.strip_prefix('%').map(str::parse::<u8>) {
                    Some(Ok(sel)) => KNOWN
                        .get(usize::from(sel) % (KNOWN.len() + 1))
                        .copied()
                        .unwrap_or(UNKNOWN),
                    _ => name,
                };
                pairs.push((name.to_owned(), value.to_owned()));
            }
        }
    }
    Input {
        broker_attempts,
        now,
        headers: pairs.into_iter().collect(),
    }
}

fuzz_target!(|data: &[u8]| {
    let input = parse(data);
    let env = Envelope::decode(&input.headers);

    // Reconciling with the broker's count never lowers it, and never puts
    // the first failure in the future.
    let state = env.retry_state(input.broker_attempts, input.now);
    assert!(
        state.attempts >= input.broker_attempts.unwrap_or(0),
        "attempts {} below the broker's {:?} for {input:?}",
        state.attempts,
        input.broker_attempts,
    );
    assert!(
        state.attempts >= env.attempts,
        "attempts lowered: {input:?}"
    );
    if let Some(t) = state.first_failure_at {
        assert!(t <= input.now, "first failure in the future: {input:?}");
    }

    // Re-encoding stays within the budget and leaves other headers alone.
    let limits = EnvelopeLimits::default();
    let mut out = input.headers.clone();
    env.encode(&mut out, &limits);
    let size = out.byte_size(HEADER_PREFIX);
    assert!(
        size <= limits.max_bytes(),
        "encoded envelope is {size} bytes, over {} for {input:?}",
        limits.max_bytes(),
    );
    let others = |h: &Headers| -> Vec<(String, String)> {
        h.iter()
            .filter(|(k, _)| !k.starts_with(HEADER_PREFIX))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    assert_eq!(
        others(&out),
        others(&input.headers),
        "non-Parkway headers changed"
    );
    assert!(out.get(UNKNOWN).is_none(), "unknown prefixed header kept");

    // What the rules read survives the round trip.
    let again = Envelope::decode(&out);
    assert_eq!(
        again.attempts, env.attempts,
        "attempts: {input:?} -> {out:?}"
    );
    assert_eq!(again.class, env.class, "class: {input:?} -> {out:?}");
    assert_eq!(again.reason, env.reason, "reason: {input:?} -> {out:?}");

    // One encode normalises for good: encoding what was decoded from it
    // writes exactly the same headers.
    let mut out2 = input.headers.clone();
    again.encode(&mut out2, &limits);
    assert_eq!(out2, out, "encode is not idempotent for {input:?}");
});
