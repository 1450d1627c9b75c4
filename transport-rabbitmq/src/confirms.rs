//! Publisher confirms whose returns cannot be swapped.
//!
//! Why this exists: a `basic.return` carries no delivery tag. lapin parks
//! it and hands it to whichever confirm on the channel completes next, and a
//! `multiple` ack completes its tags in no set order. With mandatory
//! publishes pipelined on one channel (as they must be: one publish in
//! flight per channel costs a fifth of the retry path's throughput at the
//! broker), a returned retry copy could read as accepted, so its original
//! would be acked and the message lost, while some other publish read as
//! refused.
//!
//! So every publish carries an id ([`PUBLISH_ID`]), the broker echoes it in
//! the return, and one driver task per channel watches all confirms and
//! credits each return to the publish it names. A publish is decided only
//! when no confirm can still hold its return: the broker sends a return
//! before the confirm of its own publish, so whichever confirm lapin gave it
//! to was resolved no later than the owner's. The driver therefore decides a
//! resolved confirm only after one more sweep over every confirm of every
//! publish issued up to then.
//!
//! The publish itself runs in a task of its own, so a caller that gives up
//! (a timeout, a cancelled worker) cannot drop a confirm that holds someone
//! else's return.

use std::{
    collections::{BTreeSet, HashMap},
    future::poll_fn,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use bytes::Bytes;
use lapin::{
    BasicProperties, Channel, Confirmation, PublisherConfirm,
    options::BasicPublishOptions,
    types::{AMQPValue, FieldTable, ShortString},
};
use parkway_core::{ErrorKind, TransportError};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::{KIND, link::lapin_error};

/// The header that ties a returned message to its publish (a number, unique
/// per channel; replaced on every copy, never shown to handlers).
pub(crate) const PUBLISH_ID: &str = "x-parkway-publish";

/// What the broker said about one publish.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Accepted (routed and, for durable queues, stored).
    Ack,
    /// Refused by the broker.
    Nack,
    /// Unroutable: returned with this code and text.
    Returned(u16, String),
}

/// One confirm-mode channel and the driver that settles its confirms.
#[derive(Debug)]
pub(crate) struct Confirms {
    channel: Channel,
    shared: Arc<Shared>,
    to_driver: mpsc::UnboundedSender<Issued>,
    driver: tokio::task::JoinHandle<()>,
}

/// Ids handed out and those not yet in the driver's hands.
#[derive(Debug, Default)]
struct Ids {
    next: u64,
    unregistered: BTreeSet<u64>,
}

#[derive(Debug, Default)]
struct Shared {
    ids: Mutex<Ids>,
    registered: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ids> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every publish that got an id before now is in the driver's queue
    /// (or failed before it had a confirm).
    async fn all_registered_before_now(&self) {
        let watermark = self.lock().next;
        loop {
            let registered = self.registered.notified();
            tokio::pin!(registered);
            registered.as_mut().enable();
            let waiting = self
                .lock()
                .unregistered
                .first()
                .is_some_and(|&id| id < watermark);
            if !waiting {
                return;
            }
            registered.await;
        }
    }

    fn registered(&self, id: u64) {
        self.lock().unregistered.remove(&id);
        self.registered.notify_waiters();
    }
}

/// A publish on its way to the broker, with where its outcome goes.
struct Issued {
    id: u64,
    confirm: PublisherConfirm,
    outcome: oneshot::Sender<Result<Outcome, TransportError>>,
}

impl Confirms {
    /// Takes over `channel` (already in confirm mode).
    pub(crate) fn new(channel: Channel) -> Confirms {
        let shared = Arc::new(Shared::default());
        let (to_driver, from_publishers) = mpsc::unbounded_channel();
        let driver = tokio::spawn(drive(shared.clone(), from_publishers));
        Confirms {
            channel,
            shared,
            to_driver,
            driver,
        }
    }

    /// The channel (for its status).
    pub(crate) fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Publishes `mandatory` and resolves with the broker's verdict on this
    /// very publish. Dropping the future does not cancel the publish.
    pub(crate) fn publish(
        &self,
        exchange: ShortString,
        routing_key: ShortString,
        body: Bytes,
        properties: BasicProperties,
    ) -> impl Future<Output = Result<Outcome, TransportError>> + use<> {
        let id = {
            let mut ids = self.shared.lock();
            let id = ids.next;
            ids.next += 1;
            ids.unregistered.insert(id);
            id
        };
        let properties = with_id(properties, id);
        let (outcome, verdict) = oneshot::channel();
        let (channel, shared, to_driver) = (
            self.channel.clone(),
            self.shared.clone(),
            self.to_driver.clone(),
        );
        let options = BasicPublishOptions {
            mandatory: true,
            immediate: false,
        };
        tokio::spawn(async move {
            let sent = channel
                .basic_publish(exchange, routing_key, options, &body, properties)
                .await;
            match sent {
                Ok(confirm) => {
                    let issued = Issued {
                        id,
                        confirm,
                        outcome,
                    };
                    if let Err(mpsc::error::SendError(issued)) = to_driver.send(issued) {
                        let _ = issued.outcome.send(Err(gone()));
                    }
                }
                Err(e) => {
                    let _ = outcome.send(Err(lapin_error("publish", e)));
                }
            }
            shared.registered(id);
        });
        async move { verdict.await.unwrap_or_else(|_| Err(gone())) }
    }
}

impl Drop for Confirms {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

fn gone() -> TransportError {
    TransportError::new(
        KIND,
        ErrorKind::Disconnected,
        "the publish channel closed before its confirm",
    )
}

/// `properties` with the publish id in its headers.
fn with_id(properties: BasicProperties, id: u64) -> BasicProperties {
    let mut headers = properties.headers().clone().unwrap_or_default();
    // A u64 counter stays far below i64::MAX.
    let id = i64::try_from(id).unwrap_or(i64::MAX);
    headers.insert(PUBLISH_ID.into(), AMQPValue::LongLongInt(id));
    properties.with_headers(headers)
}

/// The publish id a returned message names.
fn id_of(headers: Option<&FieldTable>) -> Option<u64> {
    match headers?.inner().get(PUBLISH_ID)? {
        AMQPValue::LongLongInt(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

/// A confirm that has resolved, its return set aside.
type Resolved = (u64, Result<Confirmation, lapin::Error>);

/// The driver's books.
#[derive(Default)]
struct Books {
    pending: Vec<(u64, PublisherConfirm)>,
    outcomes: HashMap<u64, oneshot::Sender<Result<Outcome, TransportError>>>,
    /// Returns seen, by the publish they name.
    returned: HashMap<u64, (u16, String)>,
    /// Sweeps left during which a return naming no publish makes every
    /// decided publish count as returned (never seen: all ours carry ids).
    doubt: u8,
}

impl Books {
    fn add(&mut self, issued: Issued) {
        self.outcomes.insert(issued.id, issued.outcome);
        self.pending.push((issued.id, issued.confirm));
    }

    /// Polls every pending confirm; takes the returns out of those resolved.
    fn sweep(&mut self, cx: &mut Context<'_>) -> Vec<Resolved> {
        let mut resolved = Vec::new();
        let mut i = 0;
        while i < self.pending.len() {
            let Some((_, confirm)) = self.pending.get_mut(i) else {
                break;
            };
            match Pin::new(confirm).poll(cx) {
                Poll::Pending => i += 1,
                Poll::Ready(result) => {
                    let (id, _) = self.pending.swap_remove(i);
                    resolved.push((id, result.map(|c| self.set_return_aside(c))));
                }
            }
        }
        resolved
    }

    fn set_return_aside(&mut self, confirmation: Confirmation) -> Confirmation {
        let (returned, ack) = match confirmation {
            Confirmation::Ack(r) => (r, true),
            Confirmation::Nack(r) => (r, false),
            Confirmation::NotRequested => return Confirmation::NotRequested,
        };
        if let Some(r) = returned {
            match id_of(r.delivery.properties.headers().as_ref()) {
                Some(owner) => {
                    let text = r.reply_text.as_str().to_owned();
                    self.returned.insert(owner, (r.reply_code, text));
                }
                None => {
                    tracing::error!(
                        "a returned message names no publish: the publishes decided next count as returned"
                    );
                    self.doubt = 2;
                }
            }
        }
        if ack {
            Confirmation::Ack(None)
        } else {
            Confirmation::Nack(None)
        }
    }

    fn decide(&mut self, resolved: Vec<Resolved>) {
        for (id, result) in resolved {
            let returned = self.returned.remove(&id);
            let outcome = match result {
                Err(e) => Err(lapin_error("receive the publisher confirm", e)),
                Ok(Confirmation::NotRequested) => Err(TransportError::new(
                    KIND,
                    ErrorKind::Refused,
                    "publisher confirms are not enabled on the publish channel",
                )),
                Ok(Confirmation::Nack(_)) => Ok(Outcome::Nack),
                Ok(Confirmation::Ack(_)) => Ok(match returned {
                    Some((code, text)) => Outcome::Returned(code, text),
                    None if self.doubt > 0 => Outcome::Returned(0, "unattributed return".into()),
                    None => Outcome::Ack,
                }),
            };
            if let Some(tx) = self.outcomes.remove(&id) {
                // The caller may have given up waiting: nothing to tell.
                let _ = tx.send(outcome);
            }
        }
        self.doubt = self.doubt.saturating_sub(1);
    }
}

/// Settles the channel's confirms until the channel's owner is gone and
/// nothing is pending.
async fn drive(shared: Arc<Shared>, mut from_publishers: mpsc::UnboundedReceiver<Issued>) {
    let mut books = Books::default();
    // Resolved confirms waiting for the sweep that makes them safe to decide.
    let mut resolved: Vec<Resolved> = Vec::new();
    loop {
        if resolved.is_empty() {
            let next = poll_fn(|cx| {
                let mut open = true;
                loop {
                    match from_publishers.poll_recv(cx) {
                        Poll::Ready(Some(issued)) => books.add(issued),
                        Poll::Ready(None) => {
                            open = false;
                            break;
                        }
                        Poll::Pending => break,
                    }
                }
                let done = books.sweep(cx);
                if !done.is_empty() {
                    Poll::Ready(Some(done))
                } else if !open && books.pending.is_empty() {
                    Poll::Ready(None)
                } else {
                    Poll::Pending
                }
            })
            .await;
            match next {
                Some(done) => resolved = done,
                None => return,
            }
        }
        // Whatever holds the return of a publish in `resolved` was resolved
        // before it: once every publish issued by now is in the books, one
        // more sweep has seen it.
        shared.all_registered_before_now().await;
        while let Ok(issued) = from_publishers.try_recv() {
            books.add(issued);
        }
        let fresh = poll_fn(|cx| Poll::Ready(books.sweep(cx))).await;
        books.decide(std::mem::replace(&mut resolved, fresh));
    }
}
