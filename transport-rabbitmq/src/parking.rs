//! The parking queue as a [`ParkingLot`]: browse and sweep without losing or
//! reordering anything.
//!
//! RabbitMQ cannot peek, so browsing takes messages with `basic.get`
//! *without acknowledging them* on a private channel, then closes that
//! channel: the broker puts every one of them back in its place. A sweep
//! does the same, acknowledging only the messages it moved (after their copy
//! is confirmed at the work exchange); kept messages go back in order when
//! the channel closes.

use std::sync::Arc;

use async_trait::async_trait;
use lapin::{
    Channel,
    options::{BasicAckOptions, BasicGetOptions},
};
use parkway_core::{Choice, ErrorKind, Message, Parked, ParkingLot, Selector, TransportError};

use crate::{
    KIND,
    headers::{broker_count, to_headers, understand_broker_parking},
    link::{close_quietly, lapin_error, short},
    publish,
    transport::Inner,
};

#[derive(Clone)]
pub(crate) struct RabbitParkingLot {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RabbitParkingLot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitParkingLot")
            .field("queue", &self.inner.names.parking)
            .finish()
    }
}

impl RabbitParkingLot {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        RabbitParkingLot { inner }
    }

    async fn get(&self, ch: &Channel) -> Result<Option<lapin::message::Delivery>, TransportError> {
        let got = ch
            .basic_get(
                short(&self.inner.names.parking)?,
                BasicGetOptions { no_ack: false },
            )
            .await
            .map_err(|e| {
                lapin_error(
                    &format!("read parking queue `{}`", self.inner.names.parking),
                    e,
                )
            })?;
        Ok(got.map(|m| m.delivery))
    }

    fn parked(&self, position: usize, d: &lapin::message::Delivery) -> Parked {
        let table = d.properties.headers().as_ref();
        let p = &d.properties;
        let message = Message {
            route: self.inner.names.queue.clone(),
            id: p.message_id().as_ref().map(ToString::to_string),
            key: None,
            correlation_id: p.correlation_id().as_ref().map(ToString::to_string),
            message_type: p.kind().as_ref().map(ToString::to_string),
            headers: to_headers(table),
            body: d.data.clone().into(),
        };
        let id = message
            .id
            .clone()
            .unwrap_or_else(|| format!("{}#{position}", self.inner.names.parking));
        let mut parked = Parked::new(id, message, None);
        let count = broker_count(table, &self.inner.names);
        understand_broker_parking(&mut parked.envelope, &count);
        parked.parked_at = parked.envelope.last_failure_at;
        parked
    }
}

#[async_trait]
impl ParkingLot for RabbitParkingLot {
    async fn browse(&self, limit: usize) -> Result<Vec<Parked>, TransportError> {
        let link = self.inner.link().await?;
        let ch = link.channel().await?;
        let mut out = Vec::new();
        while out.len() < limit {
            match self.get(&ch).await? {
                Some(d) => out.push(self.parked(out.len(), &d)),
                None => break,
            }
        }
        // Closing the channel puts every unacknowledged message back.
        close_quietly(&ch, "browsed").await;
        Ok(out)
    }

    async fn sweep(&self, selector: &mut dyn Selector) -> Result<(), TransportError> {
        let link = self.inner.link().await?;
        let ch = link.channel().await?;
        let names = &self.inner.names;
        let mut position = 0;
        let result = async {
            while let Some(d) = self.get(&ch).await? {
                let parked = self.parked(position, &d);
                position += 1;
                match selector.choose(&parked).await {
                    Choice::Keep => {}
                    Choice::Stop => break,
                    Choice::Move(headers) => {
                        let props = publish::copy_properties(&d.properties, &headers, true, link.frame_max);
                        let mut moved = publish::confirmed(
                            &link,
                            &names.exchange,
                            &names.routing_key,
                            bytes::Bytes::copy_from_slice(&d.data),
                            props,
                            self.inner.config.confirm_timeout,
                        )
                        .await;
                        if moved.is_ok() {
                            moved = match d.acker.ack(BasicAckOptions::default()).await {
                                Ok(true) => Ok(()),
                                Ok(false) => Err(TransportError::new(
                                    KIND,
                                    ErrorKind::Disconnected,
                                    "moved, but the parking channel closed before the ack: it stays parked too (a duplicate)",
                                )),
                                Err(e) => Err(lapin_error("remove the moved message from the parking queue", e)),
                            };
                        }
                        selector.moved(&parked, moved);
                    }
                }
            }
            Ok::<(), TransportError>(())
        }
        .await;
        // Kept messages go back, in their order, when the channel closes.
        close_quietly(&ch, "swept").await;
        result
    }
}
