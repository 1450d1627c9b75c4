//! Short retry delays, held in process.
//!
//! Why not `ChangeMessageVisibility` for every delay? Visibility is whole
//! seconds and a retry is asked for [`LEAD`] early, so any delay under two
//! seconds would be visibility 0: the message would be visible at once —
//! to every consumer, which would run it before its delay (only this
//! process knows the due time) — and would come back only as fast as a
//! long poll notices it. Instead the transport keeps such a message itself:
//! still received, its lease renewed by the heartbeat (so no other consumer
//! sees it), and hands it to the worker again when the delay is over — the
//! same thing the Kafka transport does with retry records until they are
//! due. SQS's receive count does not grow for these retries; the envelope
//! (in the memo) counts them, and after a crash the message reappears with
//! the receive count it had, so at most these short retries are repeated.

use std::{sync::Arc, time::Duration};

use parkway_core::{Delivery, Headers};

use crate::{
    inner::{Inner, Token},
    settle::LEAD,
};

/// Delays below this are held in process.
pub(crate) const IN_PROCESS_BELOW: Duration = LEAD.saturating_add(Duration::from_secs(1));

impl Inner {
    /// Hands `delivery` (whose attempt failed) back to the worker after
    /// `delay`, with the envelope of `headers`. Never fails: the message
    /// stays received and leased meanwhile.
    pub(crate) fn retry_in_process(
        self: &Arc<Self>,
        delivery: &Delivery,
        token: &Token,
        delay: Duration,
        headers: &Headers,
    ) {
        self.memo.retried(&token.sqs_id, headers);
        let again = token.again(self.leases.register(&token.receipt));
        let mut message = delivery.message.clone();
        message.headers = headers.clone();
        let origin = delivery.origin.clone();
        let attempts = delivery.broker_attempts;
        let lane = delivery.lane.clone();
        let inner = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let Some(inner) = inner.upgrade() else { return };
            // The first delivery's token gave its slot back; take one.
            if let Ok(p) = inner.room.acquire().await {
                p.forget();
            }
            if !inner.intake.is_running() {
                // Nobody to hand it to: make it visible for the next worker.
                if let Err(error) = inner.change_visibility(&again, Duration::ZERO).await {
                    tracing::warn!(%error, "could not hand back a held retry; it reappears after its visibility timeout");
                }
                return;
            }
            let mut d = Delivery::new(message, origin, again);
            d.broker_attempts = attempts;
            d.lane = lane;
            inner.intake.push(vec![d]);
        });
    }
}
