//! Test hooks that break the connection at the worst moments, to prove
//! nothing is lost (built only with the `fault-injection` feature).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::link::Link;

/// Armed faults.
#[derive(Debug, Default)]
pub struct Faults {
    close_after_confirm: AtomicUsize,
}

impl Faults {
    /// Closes the connection right after the next `n` retry or parked
    /// copies are confirmed, before their originals are acknowledged.
    pub fn close_after_confirm(&self, n: usize) {
        self.close_after_confirm.store(n, Ordering::SeqCst);
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
