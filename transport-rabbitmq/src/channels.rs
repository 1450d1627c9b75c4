//! Publish channels: one mandatory publish in flight per channel.
//!
//! Why not pipeline many publishes on one channel? A `basic.return` carries
//! no delivery tag. lapin parks it and hands it to whichever confirm on that
//! channel completes next, and a `multiple` ack completes its tags in no set
//! order. With several mandatory publishes in flight on a channel, a
//! returned retry copy can read as accepted (so its original is acked and
//! the message is lost) while some other publish reads as refused. With one
//! publish in flight per channel, the next confirm is always the return's
//! own (the broker sends a return before the confirm of its publish).
//! Concurrency comes from a pool instead: channels are opened on demand, up
//! to [`MAX_PUBLISH_CHANNELS`], and reused.

use std::sync::{Mutex, PoisonError};

use lapin::{Channel, Connection, options::ConfirmSelectOptions};
use parkway_core::{ErrorKind, TransportError};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::{
    KIND,
    link::{close_quietly, lapin_error},
};

/// Publishes in flight at once per connection, one per channel. A worker's
/// copies rarely need more; past it, a publish waits for a free channel.
pub(crate) const MAX_PUBLISH_CHANNELS: usize = 64;

/// The pool of confirm-mode channels of one connection.
#[derive(Debug)]
pub(crate) struct Channels {
    idle: Mutex<Vec<Channel>>,
    slots: Semaphore,
}

impl Channels {
    /// A pool holding `first` (already in confirm mode).
    pub(crate) fn new(first: Channel) -> Channels {
        Channels {
            idle: Mutex::new(vec![first]),
            slots: Semaphore::new(MAX_PUBLISH_CHANNELS),
        }
    }

    /// A channel with nothing in flight: an idle one, or a new one when all
    /// are busy (waits while [`MAX_PUBLISH_CHANNELS`] are).
    pub(crate) async fn lease<'a>(
        &'a self,
        connection: &Connection,
    ) -> Result<Lease<'a>, TransportError> {
        let permit = self.slots.acquire().await.map_err(|_| {
            TransportError::new(KIND, ErrorKind::Disconnected, "publish channels closed")
        })?;
        let idle = loop {
            let popped = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            match popped {
                Some(ch) if ch.status().connected() => break Some(ch),
                Some(_closed) => continue,
                None => break None,
            }
        };
        let channel = match idle {
            Some(ch) => ch,
            None => open(connection).await?,
        };
        Ok(Lease {
            pool: self,
            channel: Some(channel),
            settled: false,
            _permit: permit,
        })
    }
}

/// A new channel in confirm mode.
pub(crate) async fn open(connection: &Connection) -> Result<Channel, TransportError> {
    let ch = connection
        .create_channel()
        .await
        .map_err(|e| lapin_error("open a publish channel", e))?;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| lapin_error("enable publisher confirms", e))?;
    Ok(ch)
}

/// One channel, leased for one publish and its confirm.
///
/// Dropped unsettled (the confirm never came: a timeout, an error, a
/// cancelled publish), the channel may still receive that publish's return
/// and confirm, so it is closed instead of going back to the pool.
#[derive(Debug)]
pub(crate) struct Lease<'a> {
    pool: &'a Channels,
    channel: Option<Channel>,
    settled: bool,
    _permit: SemaphorePermit<'a>,
}

impl Lease<'_> {
    /// The leased channel.
    pub(crate) fn channel(&self) -> Result<&Channel, TransportError> {
        self.channel.as_ref().ok_or_else(|| {
            TransportError::new(KIND, ErrorKind::Disconnected, "publish channel released")
        })
    }

    /// The publish's confirm has arrived: nothing is in flight on the
    /// channel any more, it goes back to the pool.
    pub(crate) fn settled(mut self) {
        self.settled = true;
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let Some(ch) = self.channel.take() else {
            return;
        };
        if self.settled {
            if ch.status().connected() {
                self.pool
                    .idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(ch);
            }
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { close_quietly(&ch, "publish abandoned").await });
        }
    }
}
