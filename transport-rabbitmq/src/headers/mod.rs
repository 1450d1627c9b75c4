//! AMQP headers ↔ Parkway's neutral headers, and what the broker's own
//! `x-death` / `x-delivery-count` say about earlier attempts.
//!
//! Only string-like, numeric and boolean values become neutral headers;
//! tables and arrays (such as `x-death`) are read here and kept as they were
//! on the AMQP side, so a copy keeps the producer's typed headers intact.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use parkway_core::{Envelope, FailureClass, Headers, Reason, envelope::HEADER_PREFIX};

use crate::{Names, confirms::PUBLISH_ID};

/// Longest neutral header value taken from AMQP (larger ones are skipped for
/// Parkway's purposes; they stay on the AMQP side untouched).
const MAX_VALUE: usize = 64 * 1024;

/// The neutral view of an AMQP header table.
pub(crate) fn to_headers(table: Option<&FieldTable>) -> Headers {
    let mut out = Headers::new();
    let Some(table) = table else { return out };
    for (k, v) in table.inner() {
        // Transport bookkeeping, not the message's.
        if k.as_str() == PUBLISH_ID {
            continue;
        }
        if let Some(s) = text(v) {
            out.insert(k.as_str(), s);
        }
    }
    out
}

fn text(v: &AMQPValue) -> Option<String> {
    Some(match v {
        AMQPValue::LongString(s) if s.len() <= MAX_VALUE => {
            String::from_utf8(s.as_bytes().to_vec()).ok()?
        }
        AMQPValue::ShortString(s) => s.as_str().to_owned(),
        AMQPValue::Boolean(b) => b.to_string(),
        AMQPValue::ShortShortInt(n) => n.to_string(),
        AMQPValue::ShortShortUInt(n) => n.to_string(),
        AMQPValue::ShortInt(n) => n.to_string(),
        AMQPValue::ShortUInt(n) => n.to_string(),
        AMQPValue::LongInt(n) => n.to_string(),
        AMQPValue::LongUInt(n) => n.to_string(),
        AMQPValue::LongLongInt(n) => n.to_string(),
        AMQPValue::Timestamp(n) => n.to_string(),
        _ => return None,
    })
}

/// The headers of a copy: the original AMQP table with the `x-parkway-*`
/// entries replaced by `headers`' and the broker's per-delivery counters
/// removed (a copy is a new message to the broker).
pub(crate) fn for_copy(original: Option<&FieldTable>, headers: &Headers) -> FieldTable {
    let mut out = FieldTable::default();
    if let Some(t) = original {
        for (k, v) in t.inner() {
            let key = k.as_str();
            if key.starts_with(HEADER_PREFIX) || key == "x-delivery-count" {
                continue;
            }
            out.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in headers.iter().filter(|(k, _)| k.starts_with(HEADER_PREFIX)) {
        if let Ok(key) = ShortString::try_new(k) {
            out.insert(
                key,
                AMQPValue::LongString(LongString::from(v.as_bytes().to_vec())),
            );
        }
    }
    out
}

/// What the broker counted about this message.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct BrokerCount {
    /// Times the message expired out of one of our wait queues (= retries).
    pub(crate) expired_from_wait: u32,
    /// Quorum queues' count of earlier failed deliveries of this copy.
    pub(crate) delivery_count: u32,
    /// The latest broker dead-lettering that was not one of our retries
    /// (reason, queue, time): `delivery_limit`, `rejected`, `maxlen`, …
    pub(crate) dead_lettered: Option<(String, String, Option<SystemTime>)>,
}

impl BrokerCount {
    /// Earlier failed attempts as the broker saw them.
    pub(crate) fn attempts(&self) -> u32 {
        self.expired_from_wait.saturating_add(self.delivery_count)
    }
}

/// Reads `x-death` and `x-delivery-count`, tolerating any shape.
pub(crate) fn broker_count(table: Option<&FieldTable>, names: &Names) -> BrokerCount {
    let mut out = BrokerCount::default();
    let Some(table) = table else { return out };
    if let Some(v) = table.inner().get("x-delivery-count") {
        out.delivery_count = int(v)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0)
            .min(1_000_000);
    }
    let Some(AMQPValue::FieldArray(deaths)) = table.inner().get("x-death") else {
        return out;
    };
    for death in deaths.as_slice() {
        let AMQPValue::FieldTable(d) = death else {
            continue;
        };
        let get = |k: &str| d.inner().get(k).and_then(text);
        let count = d
            .inner()
            .get("count")
            .and_then(int)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1)
            .min(1_000_000);
        let (Some(reason), Some(queue)) = (get("reason"), get("queue")) else {
            continue;
        };
        if reason == "expired" && names.is_wait(&queue) {
            out.expired_from_wait = out.expired_from_wait.saturating_add(count);
        } else if out.dead_lettered.is_none() {
            let time = d.inner().get("time").and_then(int).and_then(|s| {
                u64::try_from(s)
                    .ok()
                    .map(|s| UNIX_EPOCH + Duration::from_secs(s))
            });
            out.dead_lettered = Some((reason, queue, time));
        }
    }
    out
}

fn int(v: &AMQPValue) -> Option<i64> {
    match v {
        AMQPValue::ShortShortInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortShortUInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortUInt(n) => Some(i64::from(*n)),
        AMQPValue::LongInt(n) => Some(i64::from(*n)),
        AMQPValue::LongUInt(n) => Some(i64::from(*n)),
        AMQPValue::LongLongInt(n) => Some(*n),
        AMQPValue::Timestamp(n) => i64::try_from(*n).ok(),
        _ => None,
    }
}

/// A parked message that the broker dead-lettered by itself (a crash loop
/// over `x-delivery-limit`, a reject, an overflow) has no Parkway reason:
/// fill one in from `x-death`, so operators see `BROKER_DELIVERY_LIMIT`
/// rather than a blank.
pub(crate) fn understand_broker_parking(env: &mut Envelope, count: &BrokerCount) {
    let Some((reason, queue, time)) = &count.dead_lettered else {
        return;
    };
    if env.reason.is_some() {
        return;
    }
    let code = format!("BROKER_{}", reason.to_ascii_uppercase().replace(' ', "_"));
    env.reason = Some(Reason::parse(&code).unwrap_or(Reason::UNKNOWN_FAILURE));
    env.class.get_or_insert(FailureClass::Unknown);
    env.attempts = env.attempts.max(count.attempts());
    env.origin.queue.get_or_insert_with(|| queue.clone());
    if env.first_failure_at.is_none() {
        env.first_failure_at = *time;
        env.last_failure_at = *time;
    }
}

/// Approximate encoded size of a header table, to stay under `frame_max`.
pub(crate) fn approx_size(table: &FieldTable) -> usize {
    table
        .inner()
        .iter()
        .map(|(k, v)| k.as_str().len() + value_size(v) + 2)
        .sum()
}

fn value_size(v: &AMQPValue) -> usize {
    match v {
        AMQPValue::LongString(s) => s.len() + 4,
        AMQPValue::ShortString(s) => s.as_str().len() + 1,
        AMQPValue::FieldTable(t) => approx_size(t) + 4,
        AMQPValue::FieldArray(a) => a.as_slice().iter().map(value_size).sum::<usize>() + 4,
        AMQPValue::ByteArray(b) => b.len() + 4,
        _ => 9,
    }
}

/// Drops the largest non-Parkway headers until the table fits `budget`;
/// returns the names dropped (recorded on the copy).
pub(crate) fn fit(table: &mut FieldTable, budget: usize) -> Vec<String> {
    let mut dropped = Vec::new();
    while approx_size(table) > budget {
        let largest = table
            .inner()
            .iter()
            .filter(|(k, _)| !k.as_str().starts_with(HEADER_PREFIX))
            .max_by_key(|(k, v)| k.as_str().len() + value_size(v))
            .map(|(k, _)| k.clone());
        let Some(key) = largest else { break };
        let mut rest = FieldTable::default();
        for (k, v) in table.inner() {
            if *k != key {
                rest.insert(k.clone(), v.clone());
            }
        }
        *table = rest;
        dropped.push(key.to_string());
    }
    dropped
}

#[cfg(test)]
mod tests;
