//! From a buffered record to a delivery and back.
//!
//! A record's content moves into the delivery's message (no copy); the
//! token keeps where the record is and only what the message cannot hold
//! exactly: a key that is not UTF-8, headers whose neutral view is lossy.
//! Copies (retry, park) and a record that goes back to the buffer or is
//! halted are put together from both.

use std::sync::Arc;

use parkway_core::{Delivery, Message, Origin};
use rdkafka::message::OwnedHeaders;

use crate::{
    state::{Record, Taken},
    transport::Inner,
};

/// What a delivery carries back to `settle`: where its record is, and what
/// of it the message could not hold exactly.
#[derive(Debug)]
pub(crate) struct Token {
    pub(crate) topic: Arc<str>,
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) due: Option<tokio::time::Instant>,
    /// The key's bytes when they are not UTF-8 (the message has it lossily).
    pub(crate) raw_key: Option<Vec<u8>>,
    /// The record's own headers when the message's are a lossy view.
    pub(crate) raw_headers: Option<OwnedHeaders>,
    pub(crate) epoch: u64,
    /// The rebalance generation it was handed out in (see `finishes`).
    pub(crate) generation: u64,
    /// Where its partition was in the state (a hint for the settle's
    /// lookup, see `State::index`).
    pub(crate) slot: usize,
}

impl Token {
    /// The key's bytes, for a copy of the record.
    pub(crate) fn key<'a>(&'a self, message: &'a Message) -> Option<&'a [u8]> {
        self.raw_key
            .as_deref()
            .or(message.key.as_deref().map(str::as_bytes))
    }

    /// The record again, from the token and the delivery's message (for a
    /// record that goes back to the buffer or is halted).
    pub(crate) fn record(&self, message: &Message) -> Record {
        Record {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: self.offset,
            key: self.key(message).map(<[u8]>::to_vec),
            payload: message.body.clone(),
            headers: message.headers.clone(),
            raw_headers: self.raw_headers.clone(),
            due: self.due,
        }
    }
}

/// A key as the message holds it (lossily if it is not UTF-8) and, only
/// then, its bytes.
fn split_key(key: Option<Vec<u8>>) -> (Option<String>, Option<Vec<u8>>) {
    match key.map(String::from_utf8) {
        None => (None, None),
        Some(Ok(k)) => (Some(k), None),
        Some(Err(e)) => (
            Some(String::from_utf8_lossy(e.as_bytes()).into_owned()),
            Some(e.into_bytes()),
        ),
    }
}

impl Inner {
    /// Hands a record out: its content becomes the message.
    pub(crate) fn delivery(&self, taken: Taken) -> Delivery {
        let Taken {
            record,
            epoch,
            slot,
            generation,
        } = taken;
        let Record {
            topic,
            partition,
            offset,
            key,
            payload,
            headers,
            raw_headers,
            due,
        } = record;
        let (key, raw_key) = split_key(key);
        let message = Message::from_headers(self.config.topic.clone(), key, headers, payload);
        let origin = Origin {
            queue: Some(String::from(&*topic)),
            partition: Some(partition),
            offset: Some(offset),
        };
        // Lanes only matter to ordered policies; skip the allocation else.
        let lane = self.ordered.then(|| format!("{topic}:{partition}"));
        let token = Token {
            topic,
            partition,
            offset,
            due,
            raw_key,
            raw_headers,
            epoch,
            generation,
            slot,
        };
        let delivery = Delivery::new(message, origin, token);
        match lane {
            Some(lane) => delivery.with_lane(lane),
            None => delivery,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Whatever the key's bytes, a copy gets them back exactly, and the
        /// message holds them as text.
        #[test]
        fn keys_survive_the_round_trip(key in proptest::option::of(prop_oneof![
            "[a-z0-9-]{0,12}".prop_map(String::into_bytes),
            proptest::collection::vec(any::<u8>(), 0..12),
        ])) {
            let (text, raw_key) = split_key(key.clone());
            let mut message = Message::new("t", "");
            message.key = text;
            let token = Token {
                topic: Arc::from("t"),
                partition: 0,
                offset: 0,
                due: None,
                raw_key,
                raw_headers: None,
                epoch: 1,
                generation: 0,
                slot: 0,
            };
            prop_assert_eq!(token.key(&message), key.as_deref());
            prop_assert_eq!(token.record(&message).key, key.clone());
            if let Some(k) = &key {
                prop_assert_eq!(message.key, Some(String::from_utf8_lossy(k).into_owned()));
            }
        }
    }
}
