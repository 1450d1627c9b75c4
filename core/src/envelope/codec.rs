//! The one codec between [`Envelope`] and [`Headers`].
//!
//! Encoding writes the fields the rules need first and the context after, so
//! when the byte budget runs short it is context (then the error text) that
//! gets cut, never the attempt count. Decoding treats anything missing,
//! malformed, negative or absurd as absent and logs the header's name (never
//! its value: producers put secrets in the oddest places).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Envelope, EnvelopeLimits, Headers, Origin, Replay, truncate};
use crate::failure::{FailureClass, Reason};

/// Every Parkway header starts with this prefix.
pub const HEADER_PREFIX: &str = "x-parkway-";

/// Header names written by the codec.
pub mod names {
    #![allow(missing_docs)]
    pub const ATTEMPT: &str = "x-parkway-attempt";
    pub const FIRST_FAILURE_AT: &str = "x-parkway-first-failure-at";
    pub const LAST_FAILURE_AT: &str = "x-parkway-last-failure-at";
    pub const TOTAL_DELAY_MS: &str = "x-parkway-total-delay-ms";
    pub const LAST_DELAY_MS: &str = "x-parkway-last-delay-ms";
    pub const DUE_AT: &str = "x-parkway-due-at";
    pub const CLASS: &str = "x-parkway-class";
    pub const REASON: &str = "x-parkway-reason";
    pub const MESSAGE_ID: &str = "x-parkway-message-id";
    pub const ORIGIN_QUEUE: &str = "x-parkway-origin-queue";
    pub const ORIGIN_PARTITION: &str = "x-parkway-origin-partition";
    pub const ORIGIN_OFFSET: &str = "x-parkway-origin-offset";
    pub const CORRELATION_ID: &str = "x-parkway-correlation-id";
    pub const MESSAGE_TYPE: &str = "x-parkway-message-type";
    pub const REPLAY_ID: &str = "x-parkway-replay-id";
    pub const REPLAYED_BY: &str = "x-parkway-replayed-by";
    pub const REPLAY_REASON: &str = "x-parkway-replay-reason";
    pub const ORIGINAL_ATTEMPTS: &str = "x-parkway-original-attempts";
    pub const HANDLER_VERSION: &str = "x-parkway-handler-version";
    pub const LAST_ERROR: &str = "x-parkway-last-error";
}

/// Longest id, name or replay text kept, in bytes.
pub(crate) const MAX_FIELD: usize = 128;
/// Longest error text kept in memory (the encoder cuts it further).
pub(crate) const MAX_DECODED_ERROR: usize = 16 * 1024;
/// Attempt counts above this are not believed.
const MAX_BELIEVABLE_ATTEMPTS: u64 = 1_000_000;
/// Times outside [2000-01-01, 2200-01-01) are not believed.
const EARLIEST_SECS: u64 = 946_684_800;
const LATEST_SECS: u64 = 7_258_118_400;

impl Envelope {
    /// Replaces the `x-parkway-*` headers in `headers` with this envelope,
    /// within `limits`. Other headers are left alone.
    pub fn encode(&self, headers: &mut Headers, limits: &EnvelopeLimits) {
        headers.retain(|k, _| !k.starts_with(HEADER_PREFIX));
        let mut w = Writer {
            headers,
            left: limits.max_bytes(),
        };
        use names::*;
        w.put(ATTEMPT, Some(self.attempts.to_string()));
        w.put(FIRST_FAILURE_AT, self.first_failure_at.and_then(fmt_time));
        w.put(LAST_FAILURE_AT, self.last_failure_at.and_then(fmt_time));
        w.put(
            TOTAL_DELAY_MS,
            Some(self.total_delay.as_millis().to_string()),
        );
        w.put(
            LAST_DELAY_MS,
            self.last_delay.map(|d| d.as_millis().to_string()),
        );
        w.put(DUE_AT, self.due_at.and_then(fmt_time));
        w.put(CLASS, self.class.map(|c| c.as_str().to_owned()));
        w.put(REASON, self.reason.as_ref().map(Reason::to_string));
        w.text(MESSAGE_ID, self.message_id.as_deref());
        w.text(ORIGIN_QUEUE, self.origin.queue.as_deref());
        w.put(
            ORIGIN_PARTITION,
            self.origin.partition.map(|p| p.to_string()),
        );
        w.put(ORIGIN_OFFSET, self.origin.offset.map(|o| o.to_string()));
        w.text(CORRELATION_ID, self.correlation_id.as_deref());
        w.text(MESSAGE_TYPE, self.message_type.as_deref());
        if let Some(r) = &self.replay {
            w.text(REPLAY_ID, Some(&r.id));
            w.text(REPLAYED_BY, Some(&r.by));
            w.text(REPLAY_REASON, Some(&r.reason));
            w.put(ORIGINAL_ATTEMPTS, Some(r.original_attempts.to_string()));
        }
        w.text(HANDLER_VERSION, self.handler_version.as_deref());
        if let Some(e) = &self.last_error {
            let room = w.left.saturating_sub(LAST_ERROR.len());
            let cut = truncate(e, room.min(limits.max_error_bytes()));
            w.put(LAST_ERROR, Some(clean(cut)));
        }
    }

    /// Reads the envelope from headers. Never fails: anything unusable is
    /// treated as absent and logged by header name.
    pub fn decode(headers: &Headers) -> Envelope {
        use names::*;
        // Most messages are on their first attempt and carry no envelope:
        // one ordered lookup instead of twenty.
        if !headers.has_prefix(HEADER_PREFIX) {
            return Envelope::default();
        }
        let r = Reader { headers };
        let replay_id = r.text(REPLAY_ID);
        let replay = replay_id.map(|id| Replay {
            id,
            by: r.text(REPLAYED_BY).unwrap_or_default(),
            reason: r.text(REPLAY_REASON).unwrap_or_default(),
            original_attempts: r.attempts(ORIGINAL_ATTEMPTS).unwrap_or(0),
        });
        Envelope {
            attempts: r.attempts(ATTEMPT).unwrap_or(0),
            first_failure_at: r.time(FIRST_FAILURE_AT),
            last_failure_at: r.time(LAST_FAILURE_AT),
            total_delay: r.millis(TOTAL_DELAY_MS).unwrap_or_default(),
            last_delay: r.millis(LAST_DELAY_MS),
            due_at: r.time(DUE_AT),
            class: r.parse(CLASS, |s| s.parse::<FailureClass>().ok()),
            reason: r.parse(REASON, |s| Reason::parse(s).ok()),
            last_error: r
                .headers
                .get(LAST_ERROR)
                .map(|s| truncate(s, MAX_DECODED_ERROR).to_owned()),
            origin: Origin {
                queue: r.text(ORIGIN_QUEUE),
                partition: r.parse(ORIGIN_PARTITION, |s| {
                    s.parse::<i32>().ok().filter(|p| *p >= 0)
                }),
                offset: r.parse(ORIGIN_OFFSET, |s| s.parse::<i64>().ok().filter(|o| *o >= 0)),
            },
            message_id: r.text(MESSAGE_ID),
            correlation_id: r.text(CORRELATION_ID),
            message_type: r.text(MESSAGE_TYPE),
            handler_version: r.text(HANDLER_VERSION),
            replay,
        }
    }
}

struct Writer<'a> {
    headers: &'a mut Headers,
    left: usize,
}

impl Writer<'_> {
    fn put(&mut self, name: &'static str, value: Option<String>) {
        let Some(value) = value else { return };
        let cost = name.len() + value.len();
        if cost <= self.left {
            self.left -= cost;
            self.headers.insert(name, value);
        } else {
            tracing::debug!(
                header = name,
                "retry header dropped: envelope byte budget spent"
            );
        }
    }

    fn text(&mut self, name: &'static str, value: Option<&str>) {
        let value = value
            .map(|v| clean(truncate(v, MAX_FIELD)).trim().to_owned())
            .filter(|v| !v.is_empty());
        self.put(name, value);
    }
}

struct Reader<'a> {
    headers: &'a Headers,
}

impl Reader<'_> {
    fn parse<T>(&self, name: &'static str, f: impl FnOnce(&str) -> Option<T>) -> Option<T> {
        let raw = self.headers.get(name)?;
        let parsed = f(raw.trim());
        if parsed.is_none() {
            tracing::warn!(header = name, "ignoring malformed retry header");
        }
        parsed
    }

    fn attempts(&self, name: &'static str) -> Option<u32> {
        self.parse(name, |s| {
            s.parse::<u64>()
                .ok()
                .filter(|n| *n <= MAX_BELIEVABLE_ATTEMPTS)
                .and_then(|n| u32::try_from(n).ok())
        })
    }

    fn millis(&self, name: &'static str) -> Option<Duration> {
        let max = crate::backoff::CEILING.as_millis();
        self.parse(name, |s| {
            s.parse::<u64>()
                .ok()
                .filter(|ms| u128::from(*ms) <= max.saturating_mul(100))
                .map(Duration::from_millis)
        })
    }

    fn time(&self, name: &'static str) -> Option<SystemTime> {
        self.parse(name, |s| {
            humantime::parse_rfc3339_weak(s).ok().filter(|t| {
                t.duration_since(UNIX_EPOCH)
                    .is_ok_and(|d| (EARLIEST_SECS..LATEST_SECS).contains(&d.as_secs()))
            })
        })
    }

    fn text(&self, name: &'static str) -> Option<String> {
        self.parse(name, |s| {
            let cleaned = clean(truncate(s, MAX_FIELD));
            let t = cleaned.trim();
            (!t.is_empty()).then(|| t.to_owned())
        })
    }
}

/// Formats a believable time; others (which the formatter cannot even
/// represent, e.g. before 1970) are left out.
fn fmt_time(t: SystemTime) -> Option<String> {
    let secs = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
    (EARLIEST_SECS..LATEST_SECS)
        .contains(&secs)
        .then(|| humantime::format_rfc3339_millis(t).to_string())
}

/// Replaces control characters, which some brokers and most log viewers
/// mishandle, with spaces.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}
