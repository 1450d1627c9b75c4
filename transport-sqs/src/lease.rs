//! Leases of received messages, and the heartbeat that renews them.
//!
//! Why a heartbeat? A received SQS message is hidden only for its
//! visibility timeout. A handler that runs longer (the seed's "visibility
//! timeout saturation trap"), a delivery queued behind its FIFO group's
//! head, or one waiting out an ordered-mode pause would reappear and be
//! processed a second time by another consumer. Every message the transport
//! has received and not settled holds a lease here; one task renews the
//! leases that are about to run out, ten per `ChangeMessageVisibilityBatch`.
//!
//! A renewal must never land after a settlement changed the visibility
//! (it would undo a retry's delay): settlements that change visibility take
//! the gate shared and remove their lease first; the heartbeat takes it
//! exclusively while it renews.

use std::{
    collections::HashMap,
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{sync::RwLock, time::Instant};

use crate::batch::{Batcher, Op};

#[derive(Debug)]
struct Lease {
    receipt: String,
    expires: Instant,
}

/// The leases of one transport.
#[derive(Debug)]
pub(crate) struct Leases {
    map: Mutex<HashMap<u64, Lease>>,
    next: AtomicU64,
    /// Shared by visibility-changing settlements, exclusive for renewals.
    pub(crate) gate: RwLock<()>,
    visibility: Duration,
}

impl Leases {
    pub(crate) fn new(visibility: Duration) -> Self {
        Leases {
            map: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            gate: RwLock::new(()),
            visibility,
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<u64, Lease>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a message just received; returns its lease id.
    pub(crate) fn register(&self, receipt: &str) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.map().insert(
            id,
            Lease {
                receipt: receipt.to_owned(),
                expires: Instant::now() + self.visibility,
            },
        );
        id
    }

    /// Ends a lease (settled, or dropped).
    pub(crate) fn remove(&self, id: u64) {
        self.map().remove(&id);
    }

    /// Records that the message is hidden until `until`.
    pub(crate) fn extended(&self, id: u64, receipt: &str, until: Instant) {
        self.map().insert(
            id,
            Lease {
                receipt: receipt.to_owned(),
                expires: until,
            },
        );
    }

    /// Number of live leases.
    pub(crate) fn len(&self) -> usize {
        self.map().len()
    }

    /// How often the heartbeat looks: a third of the visibility timeout.
    fn interval(&self) -> Duration {
        (self.visibility / 3).max(Duration::from_millis(200))
    }

    /// Renews every lease with less than half a visibility timeout left.
    async fn renew(&self, batcher: &Batcher) {
        let _exclusive = self.gate.write().await;
        let now = Instant::now();
        let due: Vec<(u64, String)> = self
            .map()
            .iter()
            .filter(|(_, l)| l.expires.saturating_duration_since(now) < self.visibility / 2)
            .map(|(id, l)| (*id, l.receipt.clone()))
            .collect();
        if due.is_empty() {
            return;
        }
        let secs = i32::try_from(self.visibility.as_secs()).unwrap_or(i32::MAX);
        let mut calls = tokio::task::JoinSet::new();
        for (id, receipt) in due {
            let batcher = batcher.clone();
            calls.spawn(async move { (id, batcher.submit(&receipt, Op::Visibility(secs)).await) });
        }
        let mut results = Vec::new();
        while let Some(joined) = calls.join_next().await {
            if let Ok(r) = joined {
                results.push(r);
            }
        }
        let mut renewed = 0u64;
        let mut map = self.map();
        for (id, result) in results {
            match result {
                Ok(()) => {
                    renewed += 1;
                    if let Some(l) = map.get_mut(&id) {
                        l.expires = now + self.visibility;
                    }
                }
                // Settled meanwhile (the receipt is spent), or past SQS's
                // 12 h limit: the message may be delivered again.
                Err(error) => tracing::warn!(%error, "could not renew a message's visibility"),
            }
        }
        metrics::counter!("parkway_sqs_visibility_renewals_total").increment(renewed);
    }
}

/// The heartbeat: runs until the transport's leases are dropped.
pub(crate) async fn heartbeat(leases: std::sync::Weak<Leases>, batcher: Batcher) {
    loop {
        let Some(l) = leases.upgrade() else { return };
        let interval = l.interval();
        drop(l);
        tokio::time::sleep(interval).await;
        let Some(l) = leases.upgrade() else { return };
        l.renew(&batcher).await;
    }
}
