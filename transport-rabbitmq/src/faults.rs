//! Test hooks that break the connection at the worst moments, to prove
//! nothing is lost (built only with the `fault-injection` feature).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::link::Link;

/// Armed faults.
#[derive(Debug, Default)]
pub struct Faults {
    close_after_confirm: AtomicUsize,
    nack_next: AtomicUsize,
}

impl Faults {
    /// Closes the connection right after the next `n` retry or parked
    /// copies are confirmed, before their originals are acknowledged.
    pub fn close_after_confirm(&self, n: usize) {
        self.close_after_confirm.store(n, Ordering::SeqCst);
    }

    /// Reports the next `n` publisher confirms as nacks (the broker did
    /// take those messages, as it may have after a real nack).
    pub fn nack_next(&self, n: usize) {
        self.nack_next.store(n, Ordering::SeqCst);
    }

    /// Whether this confirm is to be reported as a nack.
    pub(crate) fn take_nack(&self) -> bool {
        self.nack_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    pub(crate) async fn after_confirm(&self, link: &Link) {
        let armed = self
            .close_after_confirm
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if armed {
            tracing::warn!("fault injection: closing the connection between confirm and ack");
            let _ = link
                .connection
                .close(320, "parkway fault injection".into())
                .await;
        }
    }
}
