//! Publisher confirms whose returns cannot be swapped.
//!
//! Why this exists: a `basic.return` carries no delivery tag. lapin parks
//! returns in a queue per channel and hands the oldest to whichever confirm
//! on the channel completes next, and a `multiple` ack completes its tags in
//! no set order. With mandatory publishes pipelined on one channel (as they
//! must be: one publish in flight per channel costs 15–20 % of the retry
//! path's throughput at the broker), a returned retry copy could read as
//! accepted, so its original would be acked and the message lost, while
//! some other publish read as refused.
//!
//! So every publish carries an id ([`PUBLISH_ID`]), the broker echoes it in
//! the return, and one driver task per channel watches all confirms and
//! credits each return to the publish it names. When is an accepted publish
//! safe to call accepted? Its return, had there been one, arrived before its
//! own confirm and queued behind returns of publishes already in flight; each
//! of those publishes' confirms takes one return off the queue. So once
//! every publish issued before the confirm was seen has had its confirm, the
//! return has been handed out and credited: the driver decides a confirm
//! only then. (Deciding by the order in which lapin completed confirms is
//! not enough: a confirm completed first can be seen ready after a later
//! one; an earlier rule built on that lost about one return in 16 runs of
//! the 600-publish test.)
//!
//! The publish itself runs in a task of its own, so a caller that gives up
//! (a timeout, a cancelled worker) cannot drop a confirm that holds someone
//! else's return.

use std::{
    collections::{BTreeSet, HashMap, VecDeque},
    future::poll_fn,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
};

use bytes::Bytes;
use futures_util::{StreamExt as _, stream::FuturesUnordered};
use lapin::{
    BasicProperties, Channel, Confirmation, PublisherConfirm,
    options::BasicPublishOptions,
    types::{AMQPValue, FieldTable, ShortString},
};
use parkway_core::{ErrorKind, TransportError};
use tokio::sync::{mpsc, oneshot};

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
    /// The next publish id (ids are handed out in order, from 0).
    next: Arc<AtomicU64>,
    to_driver: mpsc::UnboundedSender<Sent>,
    driver: tokio::task::JoinHandle<()>,
}

/// What became of a publish, for the driver.
enum Sent {
    /// On its way to the broker, with where its outcome goes.
    Issued {
        id: u64,
        confirm: PublisherConfirm,
        outcome: oneshot::Sender<Result<Outcome, TransportError>>,
    },
    /// Never sent (its caller has the error): nothing to wait for.
    Failed(u64),
}

impl Confirms {
    /// Takes over `channel` (already in confirm mode).
    pub(crate) fn new(channel: Channel) -> Confirms {
        let next = Arc::new(AtomicU64::new(0));
        let (to_driver, from_publishers) = mpsc::unbounded_channel();
        let driver = tokio::spawn(drive(next.clone(), from_publishers));
        Confirms {
            channel,
            next,
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
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let properties = with_id(properties, id);
        let (outcome, verdict) = oneshot::channel();
        let (channel, to_driver) = (self.channel.clone(), self.to_driver.clone());
        let options = BasicPublishOptions {
            mandatory: true,
            immediate: false,
        };
        tokio::spawn(async move {
            let sent = channel
                .basic_publish(exchange, routing_key, options, &body, properties)
                .await;
            let sent = match sent {
                Ok(confirm) => Sent::Issued {
                    id,
                    confirm,
                    outcome,
                },
                Err(e) => {
                    let _ = outcome.send(Err(lapin_error("publish", e)));
                    Sent::Failed(id)
                }
            };
            if let Err(mpsc::error::SendError(Sent::Issued { outcome, .. })) = to_driver.send(sent)
            {
                let _ = outcome.send(Err(gone()));
            }
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

/// A pending confirm and the publish it is for.
struct Tagged {
    id: u64,
    confirm: PublisherConfirm,
}

impl Future for Tagged {
    type Output = (u64, Result<Confirmation, lapin::Error>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let id = self.id;
        Pin::new(&mut self.confirm).poll(cx).map(|r| (id, r))
    }
}

/// A confirm that has resolved, its return set aside: decided once every
/// publish with an id below `watermark` has had its confirm.
struct Resolved {
    id: u64,
    watermark: u64,
    result: Result<Confirmation, lapin::Error>,
}

/// The driver's books.
#[derive(Default)]
struct Books {
    /// Confirms not yet resolved. Only those woken are polled: polling
    /// every one on each wake-up costs a lock per publish in flight.
    pending: FuturesUnordered<Tagged>,
    outcomes: HashMap<u64, oneshot::Sender<Result<Outcome, TransportError>>>,
    /// Ids handed out (below `known`) whose confirm has not come yet.
    unconfirmed: BTreeSet<u64>,
    known: u64,
    /// Resolved confirms in the order seen (so their watermarks ascend).
    resolved: VecDeque<Resolved>,
    /// Returns seen, by the publish they name.
    returned: HashMap<u64, (u16, String)>,
    /// A return naming no publish was seen when ids below this were handed
    /// out: its owner is one of them, so each of them still undecided counts
    /// as returned (never seen: all ours carry ids).
    doubt_below: u64,
}

impl Books {
    /// Every id handed out before `next` is waited for.
    fn learn(&mut self, next: u64) {
        self.unconfirmed.extend(self.known..next);
        self.known = self.known.max(next);
    }

    fn receive(&mut self, sent: Sent, next: &AtomicU64) {
        let id = match &sent {
            Sent::Issued { id, .. } | Sent::Failed(id) => *id,
        };
        if id >= self.known {
            self.learn(next.load(Ordering::SeqCst));
        }
        match sent {
            Sent::Issued {
                id,
                confirm,
                outcome,
            } => {
                self.outcomes.insert(id, outcome);
                self.pending.push(Tagged { id, confirm });
            }
            Sent::Failed(id) => {
                self.unconfirmed.remove(&id);
            }
        }
    }

    /// Takes every confirm resolved since the last look; sets their returns
    /// aside.
    fn sweep(&mut self, cx: &mut Context<'_>, next: &AtomicU64) {
        let mut seen = Vec::new();
        while let Poll::Ready(Some((id, result))) = self.pending.poll_next_unpin(cx) {
            self.unconfirmed.remove(&id);
            let result = result.map(|c| self.set_return_aside(c, next));
            seen.push((id, result));
        }
        if seen.is_empty() {
            return;
        }
        // Read after the confirms were seen: every publish whose return
        // could still be queued before theirs has an id below it.
        let watermark = next.load(Ordering::SeqCst);
        self.learn(watermark);
        self.resolved
            .extend(seen.into_iter().map(|(id, result)| Resolved {
                id,
                watermark,
                result,
            }));
    }

    fn set_return_aside(&mut self, confirmation: Confirmation, next: &AtomicU64) -> Confirmation {
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
                        "a returned message names no publish: every publish that may own it counts as returned"
                    );
                    self.doubt_below = next.load(Ordering::SeqCst);
                }
            }
        }
        if ack {
            Confirmation::Ack(None)
        } else {
            Confirmation::Nack(None)
        }
    }

    /// Decides every resolved confirm no unconfirmed publish can hold the
    /// return of.
    fn decide(&mut self) {
        let floor = self.unconfirmed.first().copied().unwrap_or(u64::MAX);
        while self.resolved.front().is_some_and(|r| r.watermark <= floor) {
            let Some(Resolved { id, result, .. }) = self.resolved.pop_front() else {
                break;
            };
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
                    None if id < self.doubt_below => {
                        Outcome::Returned(0, "unattributed return".into())
                    }
                    None => Outcome::Ack,
                }),
            };
            if let Some(tx) = self.outcomes.remove(&id) {
                // The caller may have given up waiting: nothing to tell.
                let _ = tx.send(outcome);
            }
        }
    }
}

/// Settles the channel's confirms until the channel's owner is gone and
/// nothing is pending.
async fn drive(next: Arc<AtomicU64>, mut from_publishers: mpsc::UnboundedReceiver<Sent>) {
    let mut books = Books::default();
    poll_fn(|cx| {
        let mut open = true;
        loop {
            match from_publishers.poll_recv(cx) {
                Poll::Ready(Some(sent)) => books.receive(sent, &next),
                Poll::Ready(None) => {
                    open = false;
                    break;
                }
                Poll::Pending => break,
            }
        }
        books.sweep(cx, &next);
        books.decide();
        if !open && books.pending.is_empty() && books.resolved.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}
