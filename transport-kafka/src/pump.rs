//! The pump: moves fetched records from librdkafka into the partition
//! buffers, so a retry record waiting for its due time never blocks the
//! poll loop and a busy partition never blocks the others.
//!
//! It takes every record librdkafka already holds in one go (one lock per
//! burst, not per record) and bounds the buffers without stalling: a full
//! source partition makes the pump wait for room, while a partition that may
//! not drain soon is paused.

use std::{
    sync::{Arc, atomic::Ordering as AtomicOrdering},
    time::{Duration, SystemTime},
};

use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt as _, StreamExt as _};
use parkway_core::{Headers, envelope::names};
use rdkafka::message::{BorrowedMessage, Message as _};
use tokio::time::Instant;

use crate::{
    headers::read,
    state::Record,
    transport::{Inner, lock},
};

/// Records taken from librdkafka per lock of the partition state, at most.
const BURST: usize = 64;

/// Runs until the transport closes (it is aborted then).
pub(crate) async fn run(inner: Arc<Inner>) {
    let mut burst = Vec::with_capacity(BURST);
    let mut topics = Topics::default();
    let mut arena = Arena::default();
    // One stream for the pump's life: it registers for wake-ups once, not
    // once per record taken.
    let mut stream = inner.consumer.stream();
    loop {
        match stream.next().await {
            Some(Ok(m)) => burst.push(record(&m, &mut topics, &mut arena)),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "kafka consumer error");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            // librdkafka's streams never end; this one would once closed.
            None => return,
        }
        // Whatever librdkafka already has, without waiting for more.
        while burst.len() < BURST {
            match stream.next().now_or_never() {
                Some(Some(Ok(m))) => burst.push(record(&m, &mut topics, &mut arena)),
                Some(Some(Err(e))) => {
                    tracing::warn!(error = %e, "kafka consumer error");
                    break;
                }
                Some(None) | None => break,
            }
        }
        place(&inner, &mut burst).await;
    }
}

/// The names of the topics seen, shared by their records. A handful (the
/// source and its tiers), so a scan beats a map.
#[derive(Default)]
struct Topics(Vec<Arc<str>>);

impl Topics {
    fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(t) = self.0.iter().find(|t| ***t == *name) {
            return t.clone();
        }
        let t: Arc<str> = Arc::from(name);
        self.0.push(t.clone());
        t
    }
}

/// Payload copies of small records share a block: one allocation (and
/// one free, when the last of them is dropped) per block instead of one
/// per record, which was a tenth of the pump's time. A retained record
/// keeps at most one block alive, so the block is small; a large payload
/// gets an allocation of its own.
#[derive(Default)]
struct Arena(BytesMut);

impl Arena {
    /// Size of a shared block.
    const BLOCK: usize = 16 * 1024;
    /// Largest payload copied into a shared block.
    const SHARED_MAX: usize = Self::BLOCK / 16;

    fn copy(&mut self, payload: &[u8]) -> Bytes {
        if payload.len() > Self::SHARED_MAX {
            return Bytes::copy_from_slice(payload);
        }
        if self.0.capacity() - self.0.len() < payload.len() {
            // The full block lives on in the records cut from it.
            self.0 = BytesMut::with_capacity(Self::BLOCK);
        }
        self.0.extend_from_slice(payload);
        self.0.split().freeze()
    }
}

/// Copies a record out of librdkafka: its headers straight into the
/// neutral view, and into a copy of their own only when that view is lossy.
fn record(m: &BorrowedMessage<'_>, topics: &mut Topics, arena: &mut Arena) -> Record {
    let (headers, raw_headers) = match m.headers() {
        Some(h) => {
            let (neutral, lossless) = read(h);
            (neutral, (!lossless).then(|| h.detach()))
        }
        None => (Headers::new(), None),
    };
    let due = headers.get(names::DUE_AT).and_then(due_instant);
    Record {
        topic: topics.get(m.topic()),
        partition: m.partition(),
        offset: m.offset(),
        key: m.key().map(<[u8]>::to_vec),
        payload: m.payload().map(|p| arena.copy(p)).unwrap_or_default(),
        headers,
        raw_headers,
        due,
    }
}

/// Buffers a burst, then pauses or waits for what filled up.
async fn place(inner: &Inner, burst: &mut Vec<Record>) {
    let n = burst.len();
    let mut full = Vec::new();
    {
        let mut s = lock(&inner.state);
        let bound = inner.config.buffer_per_partition;
        // A burst mostly holds runs of one partition: its place is the hint.
        let mut hint = 0;
        for record in burst.drain(..) {
            let Some(i) = s.index(&record.topic, record.partition, hint) else {
                continue;
            };
            hint = i;
            let Some(p) = s.at_mut(i) else {
                continue;
            };
            let (topic, partition) = (record.topic.clone(), record.partition);
            p.fetched(record);
            if p.paused || p.buffered() < bound {
                continue;
            }
            if p.tier || inner.ordered {
                // A partition that may not drain soon: pause it, the rest
                // flows.
                p.paused = true;
                inner.set_fetching(&topic, partition, false);
            } else if !full.iter().any(|(t, q)| *t == topic && *q == partition) {
                full.push((topic, partition));
            }
        }
    }
    // One wake-up per burst: a consumer that takes all it can carry wakes
    // the next one.
    if n > 0 {
        inner.ready.notify_one();
    }
    // A full source partition any consumer drains: stop fetching until it
    // has room. Pausing it instead would make librdkafka drop what it had
    // prefetched and fetch it again on resume, a stall per pause.
    for (topic, partition) in full {
        wait_for_room(inner, &topic, partition).await;
    }
}

/// Waits until the partition's buffer has room again (or it was revoked,
/// or the transport closed); librdkafka's own prefetch bound holds the
/// rest meanwhile.
async fn wait_for_room(inner: &Inner, topic: &str, partition: i32) {
    loop {
        let drained = inner.drained.notified();
        tokio::pin!(drained);
        drained.as_mut().enable();
        let room = lock(&inner.state)
            .get(topic, partition)
            .is_none_or(|p| p.buffered() < inner.config.buffer_per_partition);
        if room || inner.closed.load(AtomicOrdering::SeqCst) {
            return;
        }
        // The timeout is a safety net only: every take that makes room
        // notifies.
        let _ = tokio::time::timeout(Duration::from_millis(50), drained).await;
    }
}

/// The due time of a retry record as a monotonic instant.
fn due_instant(raw: &str) -> Option<Instant> {
    let due = humantime::parse_rfc3339_weak(raw).ok()?;
    let now = SystemTime::now();
    let wait = due
        .duration_since(now)
        .unwrap_or_default()
        .min(crate::MAX_DELAY);
    Some(Instant::now() + wait)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Every copy holds its payload byte for byte, whichever block it
        /// was cut from, and a later copy never disturbs an earlier one.
        #[test]
        fn arena_copies_are_exact(payloads in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..3000), 0..60,
        )) {
            let mut arena = Arena::default();
            let copies: Vec<Bytes> = payloads.iter().map(|p| arena.copy(p)).collect();
            for (copy, payload) in copies.iter().zip(&payloads) {
                prop_assert_eq!(&copy[..], &payload[..]);
            }
        }
    }

    #[test]
    fn small_payloads_share_a_block_and_large_ones_do_not() {
        let mut arena = Arena::default();
        let a = arena.copy(b"first");
        let b = arena.copy(b"second");
        assert_eq!(
            a.as_ptr().wrapping_add(a.len()),
            b.as_ptr(),
            "cut back to back from one block"
        );
        let big = vec![7u8; Arena::SHARED_MAX + 1];
        let c = arena.copy(&big);
        let d = arena.copy(b"third");
        assert_eq!(&c[..], &big[..]);
        assert_eq!(
            b.as_ptr().wrapping_add(b.len()),
            d.as_ptr(),
            "a large payload leaves the block as it was"
        );
    }
}
