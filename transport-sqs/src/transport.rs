//! [`SqsTransport`]: connect, publish, receive and settle.

use std::{
    sync::{Arc, atomic::Ordering as AtomicOrdering},
    time::Duration,
};

use async_trait::async_trait;
use parkway_core::{
    Capabilities, DelayMode, Delivery, ErrorKind, Message, Ordering, ParkingLot, RetryPolicy,
    Settle, Transport, TransportError, Unsettled,
};
use tokio::sync::Semaphore;

use crate::{
    KIND, RetryMode, SqsConfig,
    attributes::from_headers,
    batch::Batcher,
    client,
    inner::{CORRELATION_ID, Inner, MESSAGE_ID, MESSAGE_TYPE, Token},
    intake::Intake,
    lease::{Leases, heartbeat},
    memo::Memo,
    parking::SqsParkingLot,
    redeliver::IN_PROCESS_BELOW,
    settle::{DEFAULT_GROUP, fresh_dedup},
    topology,
};

/// The SQS transport of one source queue and its dead-letter queue.
///
/// Cheap to clone: clones share the client, the pollers and the leases.
#[derive(Clone)]
pub struct SqsTransport {
    pub(crate) inner: Arc<Inner>,
    lot: SqsParkingLot,
}

impl std::fmt::Debug for SqsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsTransport")
            .field("config", &self.inner.config)
            .field("ordered", &self.inner.ordered)
            .finish_non_exhaustive()
    }
}

impl SqsTransport {
    /// Connects and creates (or verifies) the source queue and its DLQ for
    /// `policies`: the redrive policy's `maxReceiveCount` is the largest
    /// `max_attempts` plus `receive_margin`.
    #[tracing::instrument(name = "parkway.sqs.connect", skip_all, fields(queue = %config.queue))]
    pub async fn connect<'a>(
        config: SqsConfig,
        policies: impl IntoIterator<Item = &'a RetryPolicy>,
    ) -> Result<Self, TransportError> {
        config.validate()?;
        let policies: Vec<&RetryPolicy> = policies.into_iter().collect();
        let ordered = check_ordering(&config, &policies)?;
        let max_attempts = policies.iter().map(|p| p.max_attempts()).max().unwrap_or(1);
        let client = client::build(&config).await;
        let queues = topology::ensure(&client, &config, max_attempts)
            .await
            .map_err(|e| unanswered(&config, e))?;
        let leases = Arc::new(Leases::new(config.visibility_timeout));
        let batcher = Batcher::start(client.clone(), queues.source_url.clone());
        tokio::spawn(heartbeat(Arc::downgrade(&leases), batcher.clone()));
        tracing::info!(
            queue = %queues.source_url,
            dead_letter_queue = %queues.dlq_url,
            max_receive_count = queues.max_receive_count,
            "sqs transport ready"
        );
        let inner = Arc::new(Inner {
            room: Arc::new(Semaphore::new(config.max_in_flight)),
            client,
            config,
            queues,
            leases,
            memo: Memo::default(),
            batcher,
            intake: Intake::default(),
            ordered,
        });
        Ok(SqsTransport {
            lot: SqsParkingLot::new(inner.clone()),
            inner,
        })
    }

    /// Sends a new message to the source queue (the producer side): the
    /// body as is (SQS bodies are text), headers as String attributes, the
    /// id, correlation id and type as attributes too. On a FIFO queue the
    /// message key is the group (default `parkway`) and the id the
    /// deduplication id.
    pub async fn publish(&self, msg: &Message) -> Result<(), TransportError> {
        let body = std::str::from_utf8(&msg.body).map_err(|e| {
            TransportError::new(
                KIND,
                ErrorKind::Config,
                "an SQS message body must be UTF-8 text",
            )
            .with_source(e)
        })?;
        let mut headers = msg.headers.clone();
        for (name, value) in [
            (MESSAGE_ID, &msg.id),
            (CORRELATION_ID, &msg.correlation_id),
            (MESSAGE_TYPE, &msg.message_type),
        ] {
            if let Some(v) = value {
                headers.insert(name, v.as_str());
            }
        }
        let attrs = from_headers(&headers)?;
        let mut req = self
            .inner
            .client
            .send_message()
            .queue_url(&self.inner.queues.source_url)
            .message_body(body)
            .set_message_attributes((!attrs.is_empty()).then_some(attrs));
        if self.inner.config.is_fifo() {
            let dedup = msg.id.clone().unwrap_or_else(|| fresh_dedup("m"));
            req = req
                .message_group_id(msg.key.as_deref().unwrap_or(DEFAULT_GROUP))
                .message_deduplication_id(dedup);
        }
        req.send()
            .await
            .map_err(|e| client::error("send a message", e))?;
        Ok(())
    }

    /// The source queue's URL.
    pub fn queue_url(&self) -> &str {
        &self.inner.queues.source_url
    }

    /// The dead-letter queue's URL.
    pub fn dead_letter_queue_url(&self) -> &str {
        &self.inner.queues.dlq_url
    }

    /// The redrive policy's `maxReceiveCount` in force.
    pub fn max_receive_count(&self) -> u32 {
        self.inner.queues.max_receive_count
    }

    /// Messages received and not yet settled (buffered or being handled).
    pub fn in_flight(&self) -> usize {
        self.inner.leases.len()
    }

    /// Stops receiving for good: buffered messages are made visible again
    /// and `receive` returns `Ok(None)`.
    pub async fn close(&self) {
        self.inner.intake.closed.store(true, AtomicOrdering::SeqCst);
        self.stop_receiving().await;
        self.inner.intake.ready.notify_waiters();
    }

    /// Deletes both queues (tests and teardown).
    pub async fn delete_queues(&self) -> Result<(), TransportError> {
        self.close().await;
        topology::delete(&self.inner.client, &self.inner.queues).await
    }
}

fn foreign() -> TransportError {
    TransportError::foreign_delivery(KIND)
}

#[async_trait]
impl Transport for SqsTransport {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn capabilities(&self) -> Capabilities {
        capabilities(&self.inner.config)
    }

    async fn receive(&self) -> Result<Option<Delivery>, TransportError> {
        let inner = &self.inner;
        loop {
            let ready = inner.intake.ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            if inner.intake.closed.load(AtomicOrdering::SeqCst) {
                return Ok(None);
            }
            inner.intake.start(inner);
            if let Some(next) = inner.intake.take() {
                return next.map(Some);
            }
            ready.await;
        }
    }

    async fn settle(&self, delivery: Delivery, action: Settle) -> Result<(), Unsettled> {
        if let (Settle::Retry { delay, headers }, RetryMode::Visibility) =
            (&action, self.inner.config.retry_mode)
        {
            if *delay < IN_PROCESS_BELOW {
                if let Some(token) = delivery.token::<Token>() {
                    self.inner
                        .retry_in_process(&delivery, token, *delay, headers);
                    return Ok(());
                }
            }
        }
        let result = match delivery.token::<Token>() {
            Some(token) => self.inner.settle_token(token, &action).await,
            None => Err(foreign()),
        };
        result.map_err(|error| Unsettled::new(&action, error, delivery))
    }

    /// Nothing to do: the heartbeat renews the lease of every message this
    /// transport received and has not settled, however long the worker
    /// keeps it. (A visibility change here would cost the worker a round
    /// trip before every wait.)
    async fn hold(&self, delivery: &Delivery, _duration: Duration) -> Result<(), TransportError> {
        delivery.token::<Token>().map(|_| ()).ok_or_else(foreign)
    }

    async fn stop_receiving(&self) {
        let buffered = self.inner.intake.stop();
        for d in buffered {
            if let Err(e) = self.settle(d, Settle::Release).await {
                tracing::warn!(error = %e.error, "could not hand back a prefetched message; it reappears after its visibility timeout");
            }
        }
    }

    fn parking_lot(&self) -> &dyn ParkingLot {
        &self.lot
    }

    fn describe(&self) -> Vec<String> {
        let c = &self.inner.config;
        let q = &self.inner.queues;
        vec![
            format!(
                "{} queue {}, {} pollers × 10, at most {} in flight",
                if c.is_fifo() { "FIFO" } else { "standard" },
                q.source_url,
                c.pollers,
                c.max_in_flight
            ),
            format!(
                "retry: {} (whole seconds; at most {})",
                match c.retry_mode {
                    crate::RetryMode::Visibility =>
                        "ChangeMessageVisibility on the received message",
                    crate::RetryMode::Resend => "re-send with DelaySeconds, then delete",
                },
                humantime::format_duration(c.max_delay())
            ),
            format!(
                "dead-letter queue {} (RedrivePolicy maxReceiveCount {} as the crash net)",
                q.dlq_url, q.max_receive_count
            ),
            format!(
                "visibility timeout {}, renewed while a handler runs",
                humantime::format_duration(c.visibility_timeout)
            ),
        ]
    }
}

/// Names the endpoint when SQS did not answer at all (an SDK error does not
/// say where it tried).
fn unanswered(config: &SqsConfig, e: TransportError) -> TransportError {
    if !matches!(e.kind(), ErrorKind::Disconnected | ErrorKind::Timeout) {
        return e;
    }
    let at = match (&config.endpoint, &config.region) {
        (Some(endpoint), _) => format!("endpoint `{}`", crate::plan::without_userinfo(endpoint)),
        (None, Some(region)) => format!("the AWS endpoint of region `{region}`"),
        (None, None) => "the AWS endpoint of the chain's region".to_owned(),
    };
    TransportError::new(
        KIND,
        e.kind(),
        format!("no answer from SQS at {at} (transport.endpoint, transport.region): {e}"),
    )
}

/// The capabilities a transport on `config` states (the offline plan states
/// the same, from this function).
pub(crate) fn capabilities(config: &SqsConfig) -> Capabilities {
    Capabilities {
        max_delay: Some(config.max_delay()),
        // A retry returns up to `LEAD` plus a second early; the worker waits
        // out the rest from the due time (exact when this process made the
        // retry or it was re-sent).
        delay_mode: DelayMode::Exact {
            granularity: crate::settle::LEAD + Duration::from_secs(1),
        },
        ordered: config.is_fifo(),
        native_redrive: true,
        halts_in_place: false,
    }
}

/// Whether any policy is ordered; an ordered policy on a standard queue is
/// a config error naming the FIFO queue it needs.
pub(crate) fn check_ordering(
    config: &SqsConfig,
    policies: &[&RetryPolicy],
) -> Result<bool, TransportError> {
    let ordered = policies.iter().any(|p| p.ordering() == Ordering::Ordered);
    if ordered && !config.is_fifo() {
        return Err(TransportError::new(
            KIND,
            ErrorKind::Config,
            format!(
                "transport.queue: an ordered policy needs a FIFO queue (`{}.fifo`); a standard queue has no order to keep",
                config.queue_name()
            ),
        ));
    }
    Ok(ordered)
}
