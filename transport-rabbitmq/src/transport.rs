//! [`RabbitTransport`]: connection management, receive and settle.

mod declare;

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering},
    },
    time::Duration,
};

use async_trait::async_trait;
use futures_util::StreamExt;
use lapin::{
    Acker, BasicProperties, Channel, Consumer,
    options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions},
    types::FieldTable,
};
use parkway_core::{
    Capabilities, DelayMode, Delivery, ErrorKind, Message, Ordering, Origin, ParkingLot,
    RetryPolicy, Settle, Transport, TransportError, Unsettled,
};
use tokio::sync::Notify;

use crate::{
    KIND, Names, RabbitConfig, TierPlan, TopologyMode,
    headers::{broker_count, to_headers},
    link::{Link, close_quietly, lapin_error, short},
    parking::RabbitParkingLot,
    publish, topology,
};

/// What a delivery carries back to `settle`.
#[derive(Debug)]
pub(crate) struct Token {
    pub(crate) generation: u64,
    pub(crate) acker: Acker,
    pub(crate) properties: BasicProperties,
}

struct ConsumerState {
    generation: u64,
    channel: Channel,
    consumer: Consumer,
}

pub(crate) struct Inner {
    pub(crate) config: RabbitConfig,
    pub(crate) names: Names,
    pub(crate) plan: TierPlan,
    ordered: bool,
    /// The current link; read on every settle, written on reconnect.
    link: std::sync::RwLock<Option<Arc<Link>>>,
    /// Serialises reconnects.
    reconnect: tokio::sync::Mutex<()>,
    generation: AtomicU64,
    consumer: tokio::sync::Mutex<Option<ConsumerState>>,
    declared: Mutex<HashSet<Duration>>,
    /// Serialises wait-queue declarations (see `ensure_wait`).
    declaring: tokio::sync::Mutex<()>,
    closed: AtomicBool,
    close: Notify,
    #[cfg(feature = "fault-injection")]
    pub(crate) faults: Arc<crate::faults::Faults>,
}

/// The RabbitMQ transport of one work queue.
///
/// Cheap to clone: clones share the connection.
#[derive(Clone)]
pub struct RabbitTransport {
    inner: Arc<Inner>,
    lot: RabbitParkingLot,
}

impl std::fmt::Debug for RabbitTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitTransport")
            .field("config", &self.inner.config)
            .field("tiers", &self.inner.plan.tiers().len())
            .finish_non_exhaustive()
    }
}

impl RabbitTransport {
    /// Connects, plans the delay tiers for `policies`, and declares or
    /// verifies the topology.
    pub async fn connect<'a>(
        config: RabbitConfig,
        policies: impl IntoIterator<Item = &'a RetryPolicy>,
    ) -> Result<Self, TransportError> {
        config.validate()?;
        let policies: Vec<&RetryPolicy> = policies.into_iter().collect();
        let plan = TierPlan::for_policies(policies.iter().copied())
            .map_err(|e| TransportError::new(KIND, ErrorKind::Config, e.to_string()))?;
        let ordered = policies.iter().any(|p| p.ordering() == Ordering::Ordered);
        let names = Names::new(&config);
        let link = Link::open(&config, 1).await?;
        #[cfg(feature = "fault-injection")]
        let faults = link.faults.clone();
        let link = Arc::new(link);
        let verify = config.topology == TopologyMode::Verify;
        if verify {
            topology::verify(&link, &names, plan.tiers()).await?;
        } else {
            topology::declare(&link, &config, &names, ordered).await?;
        }
        let declared = if verify {
            plan.tiers().iter().copied().collect()
        } else {
            HashSet::new()
        };
        let inner = Arc::new(Inner {
            config,
            names,
            plan,
            ordered,
            link: std::sync::RwLock::new(Some(link)),
            reconnect: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(1),
            consumer: tokio::sync::Mutex::new(None),
            declared: Mutex::new(declared),
            declaring: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
            close: Notify::new(),
            #[cfg(feature = "fault-injection")]
            faults,
        });
        Ok(RabbitTransport {
            lot: RabbitParkingLot::new(inner.clone()),
            inner,
        })
    }

    /// The names of this transport's exchange and queues.
    pub fn names(&self) -> &Names {
        &self.inner.names
    }

    /// The delay tiers (one wait queue each).
    pub fn plan(&self) -> &TierPlan {
        &self.inner.plan
    }

    /// Publishes a new message to the work exchange, with a confirm (the
    /// producer side, for tools, drills and tests).
    pub async fn publish(&self, msg: &Message) -> Result<(), TransportError> {
        let link = self.inner.link().await?;
        let props = publish::new_properties(msg)?;
        let names = &self.inner.names;
        publish::confirmed(
            &link,
            &names.exchange,
            &names.routing_key,
            msg.body.clone(),
            props,
            self.inner.config.confirm_timeout,
        )
        .await
    }

    /// Stops consuming: `receive` returns `Ok(None)` from now on.
    pub async fn close(&self) {
        self.inner.closed.store(true, AtomicOrdering::SeqCst);
        self.inner.close.notify_waiters();
        let link = self
            .inner
            .link
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(link) = link {
            let close = link.connection.close(200, "closed by parkway".into());
            let _ = tokio::time::timeout(Duration::from_secs(5), close).await;
        }
    }

    /// Deletes the exchange and every queue of this topology, parked
    /// messages included (for tests and teardown).
    pub async fn delete_topology(&self) -> Result<(), TransportError> {
        let link = self.inner.link().await?;
        topology::delete(&link, &self.inner.names, self.inner.plan.tiers()).await
    }

    /// Test hooks that break the connection at chosen points.
    #[cfg(feature = "fault-injection")]
    pub fn faults(&self) -> &crate::faults::Faults {
        &self.inner.faults
    }
}

impl Inner {
    fn current(&self) -> Option<Arc<Link>> {
        let link = self.link.read().unwrap_or_else(|p| p.into_inner());
        link.as_ref().filter(|l| l.is_alive()).cloned()
    }

    /// The live link, reconnecting if the last one died.
    pub(crate) async fn link(&self) -> Result<Arc<Link>, TransportError> {
        if let Some(link) = self.current() {
            return Ok(link);
        }
        let _one_at_a_time = self.reconnect.lock().await;
        if let Some(link) = self.current() {
            return Ok(link);
        }
        if self.closed.load(AtomicOrdering::SeqCst) {
            return Err(TransportError::new(
                KIND,
                ErrorKind::Closed,
                "transport closed",
            ));
        }
        let generation = self.generation.fetch_add(1, AtomicOrdering::SeqCst) + 1;
        tracing::warn!(generation, "RabbitMQ connection lost; reconnecting");
        #[cfg_attr(not(feature = "fault-injection"), allow(unused_mut))]
        let mut link = Link::open(&self.config, generation).await?;
        #[cfg(feature = "fault-injection")]
        {
            link.faults = self.faults.clone();
        }
        let link = Arc::new(link);
        *self.link.write().unwrap_or_else(|p| p.into_inner()) = Some(link.clone());
        Ok(link)
    }

    fn is_declared(&self, tier: Duration) -> bool {
        self.declared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&tier)
    }

    /// Declares a tier's wait queue on its first use.
    ///
    /// One declaration at a time: a second declare of a quorum queue that
    /// another channel is still creating answers at once, before the queue
    /// takes messages, and a copy published then is nacked. (Seen in the
    /// practice drill: two retries needing a new tier 1.5 ms apart, the
    /// second copy nacked twice.) The later caller waits for the first
    /// declaration instead, then finds the tier declared.
    async fn ensure_wait(&self, link: &Link, tier: Duration) -> Result<(), TransportError> {
        if self.is_declared(tier) {
            return Ok(());
        }
        let _one_at_a_time = self.declaring.lock().await;
        if self.is_declared(tier) {
            return Ok(());
        }
        topology::declare_wait(link, &self.config, &self.names, tier).await?;
        self.declared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tier);
        Ok(())
    }

    fn delivery(&self, generation: u64, d: lapin::message::Delivery) -> Delivery {
        let table = d.properties.headers().as_ref();
        let headers = to_headers(table);
        let count = broker_count(table, &self.names);
        let p = &d.properties;
        let message = Message {
            route: self.names.queue.clone(),
            id: p.message_id().as_ref().map(ToString::to_string),
            key: None,
            correlation_id: p.correlation_id().as_ref().map(ToString::to_string),
            message_type: p.kind().as_ref().map(ToString::to_string),
            headers,
            body: d.data.into(),
        };
        let origin = Origin {
            queue: Some(self.names.queue.clone()),
            partition: None,
            offset: None,
        };
        let token = Token {
            generation,
            acker: d.acker,
            properties: d.properties,
        };
        Delivery::new(message, origin, token)
            .with_broker_attempts(count.attempts())
            .with_lane(self.names.queue.clone())
    }

    async fn start_consumer(&self) -> Result<ConsumerState, TransportError> {
        let link = self.link().await?;
        let channel = link.channel().await?;
        let prefetch = if self.ordered {
            1
        } else {
            self.config.prefetch
        };
        channel
            .basic_qos(prefetch, BasicQosOptions::default())
            .await
            .map_err(|e| lapin_error("set the prefetch", e))?;
        let consumer = channel
            .basic_consume(
                short(&self.names.queue)?,
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| lapin_error(&format!("consume from `{}`", self.names.queue), e))?;
        Ok(ConsumerState {
            generation: link.generation,
            channel,
            consumer,
        })
    }

    async fn ack(&self, token: &Token) -> Result<(), TransportError> {
        let ack = token.acker.ack(BasicAckOptions::default());
        self.answered("ack", ack).await
    }

    async fn requeue(&self, token: &Token) -> Result<(), TransportError> {
        let nack = token.acker.nack(BasicNackOptions {
            multiple: false,
            requeue: true,
        });
        self.answered("nack", nack).await
    }

    /// Waits for an ack/nack to be sent, at most `confirm_timeout`: on a
    /// connection that died mid-way the answer may never come.
    async fn answered(
        &self,
        what: &str,
        call: impl std::future::Future<Output = lapin::Result<bool>>,
    ) -> Result<(), TransportError> {
        match tokio::time::timeout(self.config.confirm_timeout, call).await {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => Err(gone()),
            Ok(Err(e)) => Err(lapin_error(what, e)),
            Err(_) => Err(TransportError::new(
                KIND,
                ErrorKind::Timeout,
                format!("{what} not sent in time"),
            )),
        }
    }
}

fn gone() -> TransportError {
    TransportError::new(
        KIND,
        ErrorKind::Disconnected,
        "the delivery's channel is gone; the broker has requeued it and will deliver it again",
    )
}

#[async_trait]
impl Transport for RabbitTransport {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn capabilities(&self) -> Capabilities {
        let plan = &self.inner.plan;
        let longest = plan.tiers().last().copied().unwrap_or(Duration::ZERO);
        Capabilities {
            max_delay: Some(longest.mul_f64(1.02) + Duration::from_millis(25)),
            delay_mode: DelayMode::Tiered {
                max_error_percent: plan.max_error_percent(),
            },
            ordered: true,
            native_redrive: false,
            halts_in_place: false,
        }
    }

    async fn receive(&self) -> Result<Option<Delivery>, TransportError> {
        let inner = &self.inner;
        let mut guard = inner.consumer.lock().await;
        loop {
            if inner.closed.load(AtomicOrdering::SeqCst) {
                return Ok(None);
            }
            let current = inner.generation.load(AtomicOrdering::SeqCst);
            if guard.as_ref().is_none_or(|s| s.generation != current) {
                *guard = None;
                *guard = Some(inner.start_consumer().await?);
            }
            let Some(state) = guard.as_mut() else {
                continue;
            };
            let closed = inner.close.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            if inner.closed.load(AtomicOrdering::SeqCst) {
                return Ok(None);
            }
            let next = tokio::select! {
                () = closed => return Ok(None),
                n = state.consumer.next() => n,
            };
            match next {
                Some(Ok(d)) => return Ok(Some(inner.delivery(state.generation, d))),
                Some(Err(e)) => {
                    *guard = None;
                    return Err(lapin_error("receive", e));
                }
                None => {
                    *guard = None;
                    if inner.closed.load(AtomicOrdering::SeqCst) {
                        return Ok(None);
                    }
                    return Err(TransportError::new(
                        KIND,
                        ErrorKind::Disconnected,
                        "consumer cancelled by the broker",
                    ));
                }
            }
        }
    }

    async fn settle(&self, delivery: Delivery, action: Settle) -> Result<(), Unsettled> {
        let result = match delivery.token::<Token>() {
            Some(token) => self.settle_token(&delivery, token, &action).await,
            None => Err(TransportError::foreign_delivery(KIND)),
        };
        result.map_err(|error| Unsettled::new(&action, error, delivery))
    }

    async fn stop_receiving(&self) {
        // Closing the consumer's channel hands every prefetched delivery
        // back to the broker (all handed-out ones are settled by now).
        if let Some(state) = self.inner.consumer.lock().await.take() {
            close_quietly(&state.channel, "worker stopped").await;
        }
    }

    fn parking_lot(&self) -> &dyn ParkingLot {
        &self.lot
    }

    fn describe(&self) -> Vec<String> {
        let n = &self.inner.names;
        let c = &self.inner.config;
        let tiers: Vec<String> = self
            .inner
            .plan
            .tiers()
            .iter()
            .map(|t| humantime::format_duration(*t).to_string())
            .collect();
        vec![
            format!(
                "broker {} ({:?} queues, topology {:?})",
                c.redacted_url(),
                c.queue_type,
                c.topology
            ),
            format!(
                "work: exchange `{}` --{}--> queue `{}`",
                n.exchange, n.routing_key, n.queue
            ),
            format!(
                "wait tiers ({}): {} — queue-level TTL, dead-lettered back to `{}`; a delay goes to the tier below it and the worker waits out the rest (≤ 1s), else the nearest tier (within 2%)",
                tiers.len(),
                if tiers.is_empty() {
                    "none".to_owned()
                } else {
                    tiers.join(", ")
                },
                n.exchange
            ),
            format!("parking: queue `{}` (no consumer)", n.parking),
            format!(
                "consumer: {}",
                if self.inner.ordered {
                    "single active, prefetch 1 (ordered)".to_owned()
                } else {
                    format!("prefetch {}", c.prefetch)
                }
            ),
        ]
    }
}

impl RabbitTransport {
    /// Carries out `action` on the delivery behind `token`.
    async fn settle_token(
        &self,
        delivery: &Delivery,
        token: &Token,
        action: &Settle,
    ) -> Result<(), TransportError> {
        let inner = &self.inner;
        if token.generation != inner.generation.load(AtomicOrdering::SeqCst)
            || token.acker.poisoned()
        {
            return Err(gone());
        }
        match action {
            Settle::Ack | Settle::Discard => inner.ack(token).await,
            Settle::Release => inner.requeue(token).await,
            Settle::Retry { delay, headers } => {
                self.copy_then_ack(delivery, token, Some(*delay), headers)
                    .await
            }
            Settle::Park { headers } => self.copy_then_ack(delivery, token, None, headers).await,
            _ => Err(TransportError::new(
                KIND,
                ErrorKind::Unsupported,
                format!("settlement {}", action.name()),
            )),
        }
    }

    /// Publishes the retry (`delay`) or parked (`None`) copy with a confirm,
    /// then acks the original.
    async fn copy_then_ack(
        &self,
        delivery: &Delivery,
        token: &Token,
        delay: Option<Duration>,
        headers: &parkway_core::Headers,
    ) -> Result<(), TransportError> {
        let inner = &self.inner;
        let link = inner.link().await?;
        if link.generation != token.generation {
            return Err(gone());
        }
        let names = &inner.names;
        let (exchange, routing_key) = match delay {
            None => (String::new(), names.parking.clone()),
            Some(d) => match inner.plan.tier_for(d) {
                Some(tier) => {
                    inner.ensure_wait(&link, tier).await?;
                    (String::new(), names.wait(tier))
                }
                None => (names.exchange.clone(), names.routing_key.clone()),
            },
        };
        let props = publish::copy_properties(&token.properties, headers, false, link.frame_max);
        let published = publish::confirmed(
            &link,
            &exchange,
            &routing_key,
            delivery.message.body.clone(),
            props,
            inner.config.confirm_timeout,
        )
        .await;
        if let Err(e) = published {
            if e.kind() == ErrorKind::Refused && exchange.is_empty() {
                // The wait queue is gone (deleted behind our back): declare
                // it again before the next attempt.
                if let Some(tier) = delay.and_then(|d| inner.plan.tier_for(d)) {
                    inner
                        .declared
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&tier);
                }
            }
            return Err(e);
        }
        #[cfg(feature = "fault-injection")]
        inner.faults.after_confirm(&link).await;
        inner.ack(token).await
    }
}
