//! Messages and deliveries as every transport hands them to the worker.

use std::{any::Any, fmt};

use bytes::Bytes;

use crate::envelope::{Envelope, Headers, Origin};

/// Plain header names that carry a message's identity on brokers without
/// message properties (Kafka, SQS); see [`Message::from_headers`].
pub mod identity {
    /// The message id.
    pub const MESSAGE_ID: &str = "message-id";
    /// The correlation id.
    pub const CORRELATION_ID: &str = "correlation-id";
    /// The message type.
    pub const MESSAGE_TYPE: &str = "message-type";
}

/// A message: body, headers and the few properties the lifecycle uses.
///
/// ```
/// use parkway_core::Message;
/// let m = Message::new("orders", r#"{"id":1}"#).with_id("m-1").with_key("customer-7");
/// assert_eq!(m.route, "orders");
/// assert_eq!(m.key.as_deref(), Some("customer-7"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Route the message came by (queue, topic or routing key); selects the
    /// retry policy.
    pub route: String,
    /// Message id, if the producer or broker gave one.
    pub id: Option<String>,
    /// Ordering / partitioning key (Kafka key, SQS group id, routing key).
    pub key: Option<String>,
    /// Correlation id.
    pub correlation_id: Option<String>,
    /// Message type, for filters and dashboards.
    pub message_type: Option<String>,
    /// Headers, including the `x-parkway-*` envelope.
    pub headers: Headers,
    /// The body, kept byte for byte.
    pub body: Bytes,
}

impl Message {
    /// A message with a route and a body.
    pub fn new(route: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Message {
            route: route.into(),
            id: None,
            key: None,
            correlation_id: None,
            message_type: None,
            headers: Headers::new(),
            body: body.into(),
        }
    }

    /// A message as a broker without message properties delivers it: id,
    /// correlation id and type from the plain [`identity`] headers, or else
    /// from the envelope of a copy Parkway wrote.
    ///
    /// ```
    /// use parkway_core::{Headers, Message};
    /// let h: Headers = [("message-id", "m-1"), ("x-parkway-message-type", "Order")].into_iter().collect();
    /// let m = Message::from_headers("orders", None, h, "{}");
    /// assert_eq!(m.id.as_deref(), Some("m-1"));
    /// assert_eq!(m.message_type.as_deref(), Some("Order"));
    /// ```
    pub fn from_headers(
        route: impl Into<String>,
        key: Option<String>,
        headers: Headers,
        body: impl Into<Bytes>,
    ) -> Self {
        let env = Envelope::decode(&headers);
        let plain = |name: &str| headers.get(name).map(str::to_owned);
        Message {
            route: route.into(),
            id: plain(identity::MESSAGE_ID).or(env.message_id),
            key,
            correlation_id: plain(identity::CORRELATION_ID).or(env.correlation_id),
            message_type: plain(identity::MESSAGE_TYPE).or(env.message_type),
            headers,
            body: body.into(),
        }
    }

    /// Sets the message id.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the ordering key.
    #[must_use]
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the correlation id.
    #[must_use]
    pub fn with_correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// Sets the message type.
    #[must_use]
    pub fn with_type(mut self, t: impl Into<String>) -> Self {
        self.message_type = Some(t.into());
        self
    }

    /// Sets one header.
    #[must_use]
    pub fn with_header(mut self, name: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        self.headers.insert(name, value);
        self
    }
}

/// One delivery of a message by a transport, not yet settled.
///
/// It carries a transport-private token (a delivery tag, a receipt handle, a
/// partition and offset) that only the transport that made it can read. A
/// delivery is settled exactly once: [`crate::Transport::settle`] takes it by
/// value, and hands it back on failure.
pub struct Delivery {
    /// The message.
    pub message: Message,
    /// Where it was consumed from.
    pub origin: Origin,
    /// The broker's own count of earlier deliveries of this message
    /// (`x-delivery-count`, `x-death`, `ApproximateReceiveCount − 1`), if it
    /// keeps one. Reconciled with the envelope: the larger wins.
    pub broker_attempts: Option<u32>,
    /// Order is kept per lane in ordered mode: partition, group or key.
    pub lane: Option<String>,
    token: Box<dyn Any + Send + Sync>,
}

impl Delivery {
    /// A delivery with the transport's private token.
    pub fn new(message: Message, origin: Origin, token: impl Any + Send + Sync) -> Self {
        Delivery {
            message,
            origin,
            broker_attempts: None,
            lane: None,
            token: Box::new(token),
        }
    }

    /// Sets the broker's count of earlier deliveries.
    #[must_use]
    pub fn with_broker_attempts(mut self, n: u32) -> Self {
        self.broker_attempts = Some(n);
        self
    }

    /// Sets the ordering lane.
    #[must_use]
    pub fn with_lane(mut self, lane: impl Into<String>) -> Self {
        self.lane = Some(lane.into());
        self
    }

    /// The transport's token, if it is of type `T`.
    pub fn token<T: Any>(&self) -> Option<&T> {
        self.token.downcast_ref()
    }
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("route", &self.message.route)
            .field("id", &self.message.id)
            .field("origin", &self.origin)
            .field("broker_attempts", &self.broker_attempts)
            .field("lane", &self.lane)
            .finish_non_exhaustive()
    }
}
