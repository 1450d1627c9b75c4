//! Publishing with publisher confirms: the only way a copy counts as
//! durably accepted.
//!
//! Every publish is `mandatory` (an unroutable copy comes back as a return
//! instead of vanishing) and persistent, and waits for its own confirm with
//! a timeout. Confirms are pipelined on one channel (see `confirms` for how
//! each return still reaches its own publish): a worker with 32 messages in
//! flight has up to 32 confirms outstanding, never one round-trip at a time.

use std::time::Duration;

use bytes::Bytes;
use lapin::{
    BasicProperties,
    types::{AMQPValue, FieldTable, LongString},
};
use parkway_core::{ErrorKind, Headers, Message, TransportError};

use crate::{
    KIND,
    confirms::Outcome,
    headers::{fit, for_copy},
    link::{Link, short},
};

/// Room left in a frame for everything but the header table.
const FRAME_MARGIN: usize = 8 * 1024;

/// Publishes and waits for the broker's confirm.
///
/// A nack is answered with one more publish. A nack says the broker could
/// not take the message this time (a queue process restarting, a quorum
/// queue between leaders); given up at once, the caller hands the original
/// back and the broker redelivers it at once: a retry run before its delay,
/// with one more delivery counted against its budget. A second nack is
/// final. (A nacked message may have been enqueued all the same, so the
/// second publish can make a duplicate copy: at least once, never lost.)
pub(crate) async fn confirmed(
    link: &Link,
    exchange: &str,
    routing_key: &str,
    body: Bytes,
    properties: BasicProperties,
    timeout: Duration,
) -> Result<(), TransportError> {
    let once = |properties| {
        publish_once(
            link,
            exchange,
            routing_key,
            body.clone(),
            properties,
            timeout,
        )
    };
    let outcome = match once(properties.clone()).await? {
        Outcome::Nack => {
            tracing::warn!(
                exchange,
                routing_key,
                "broker nacked a publish; publishing it once more"
            );
            once(properties).await?
        }
        other => other,
    };
    match outcome {
        Outcome::Ack => Ok(()),
        Outcome::Returned(code, text) => Err(TransportError::new(
            KIND,
            ErrorKind::Refused,
            format!(
                "returned {code} {text}: no route from exchange `{exchange}` with key `{routing_key}`"
            ),
        )),
        Outcome::Nack => Err(TransportError::new(
            KIND,
            ErrorKind::Refused,
            format!("broker nacked the publish to `{exchange}`/`{routing_key}` twice"),
        )),
    }
}

/// One mandatory publish and its confirm, within `timeout`.
async fn publish_once(
    link: &Link,
    exchange: &str,
    routing_key: &str,
    body: Bytes,
    properties: BasicProperties,
    timeout: Duration,
) -> Result<Outcome, TransportError> {
    let (ex, rk) = (short(exchange)?, short(routing_key)?);
    let publish = link.publish.publish(ex, rk, body, properties);
    let outcome = tokio::time::timeout(timeout, publish).await.map_err(|_| {
        TransportError::new(
            KIND,
            ErrorKind::Timeout,
            format!(
                "no publisher confirm within {}",
                humantime::format_duration(timeout)
            ),
        )
    })??;
    #[cfg(feature = "fault-injection")]
    if link.faults.take_nack() {
        tracing::warn!("fault injection: reporting a confirm as a nack");
        return Ok(Outcome::Nack);
    }
    Ok(outcome)
}

/// Properties of a copy: the original's identity and content properties,
/// persistent, with the envelope headers; per-message TTL and user id are
/// not carried over (a TTL would expire the copy, a foreign user id would be
/// refused).
pub(crate) fn copy_properties(
    original: &BasicProperties,
    headers: &Headers,
    replay: bool,
    frame_max: usize,
) -> BasicProperties {
    let mut table = for_copy(original.headers().as_ref(), headers);
    if replay {
        strip_death(&mut table);
    }
    let dropped = fit(&mut table, frame_max.saturating_sub(FRAME_MARGIN));
    if !dropped.is_empty() {
        tracing::warn!(dropped = ?dropped, "headers too large for the broker's frame; dropped from the copy");
        table.insert(
            "x-parkway-dropped-headers".into(),
            AMQPValue::LongString(LongString::from(dropped.join(","))),
        );
    }
    let mut p = BasicProperties::default()
        .with_delivery_mode(2)
        .with_headers(table);
    if let Some(v) = original.content_type() {
        p = p.with_content_type(v.clone());
    }
    if let Some(v) = original.content_encoding() {
        p = p.with_content_encoding(v.clone());
    }
    if let Some(v) = original.correlation_id() {
        p = p.with_correlation_id(v.clone());
    }
    if let Some(v) = original.message_id() {
        p = p.with_message_id(v.clone());
    }
    if let Some(v) = original.kind() {
        p = p.with_type(v.clone());
    }
    if let Some(v) = original.timestamp() {
        p = p.with_timestamp(*v);
    }
    if let Some(v) = original.app_id() {
        p = p.with_app_id(v.clone());
    }
    if let Some(v) = original.priority() {
        p = p.with_priority(*v);
    }
    if let Some(v) = original.reply_to() {
        p = p.with_reply_to(v.clone());
    }
    p
}

/// A replayed message starts a fresh budget: the broker's death history of
/// its earlier life must not count against it.
fn strip_death(table: &mut FieldTable) {
    let keep: Vec<_> = table
        .inner()
        .iter()
        .filter(|(k, _)| {
            let k = k.as_str();
            k != "x-death" && !k.starts_with("x-first-death-") && !k.starts_with("x-last-death-")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut out = FieldTable::default();
    for (k, v) in keep {
        out.insert(k, v);
    }
    *table = out;
}

/// Properties for a new message from a [`Message`] (the publisher side).
pub(crate) fn new_properties(msg: &Message) -> Result<BasicProperties, TransportError> {
    let mut table = FieldTable::default();
    for (k, v) in msg.headers.iter() {
        table.insert(
            short(k)?,
            AMQPValue::LongString(LongString::from(v.as_bytes().to_vec())),
        );
    }
    let mut p = BasicProperties::default()
        .with_delivery_mode(2)
        .with_headers(table);
    if let Some(id) = &msg.id {
        p = p.with_message_id(short(id)?);
    }
    if let Some(c) = &msg.correlation_id {
        p = p.with_correlation_id(short(c)?);
    }
    if let Some(t) = &msg.message_type {
        p = p.with_type(short(t)?);
    }
    Ok(p)
}

#[cfg(test)]
mod tests;
