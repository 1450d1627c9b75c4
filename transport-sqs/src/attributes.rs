//! SQS message attributes ↔ Parkway's neutral headers.
//!
//! Why one attribute for the whole envelope? SQS allows 10 message
//! attributes and 256 KiB per message, names and types included. The
//! envelope has up to 19 fields, so it travels as one compact JSON object in
//! the attribute [`ENVELOPE_ATTRIBUTE`] (`{"attempt":"3","reason":…}`, the
//! `x-parkway-` prefix left out), bounded by the core codec's byte budget.
//! The producer's own attributes are copied as they are (binary ones too),
//! and the body is never touched, so a parked or retried copy is the
//! original byte for byte plus one attribute.

use std::collections::HashMap;

use aws_sdk_sqs::types::MessageAttributeValue;
use parkway_core::{ErrorKind, Headers, TransportError, envelope::HEADER_PREFIX};

use crate::KIND;

/// The message attribute holding the envelope.
pub const ENVELOPE_ATTRIBUTE: &str = "parkway";
/// SQS's limit on message attributes per message.
pub const MAX_ATTRIBUTES: usize = 10;
/// SQS's limit on a message: body plus attribute names, types and values.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// Envelope keys the transport adds itself (not core fields): the FIFO
/// deduplication id the message had when it was parked.
pub(crate) const DEDUP_KEY: &str = "sqs-deduplication-id";
/// Longest envelope attribute read back (anything longer is forged).
const MAX_ENVELOPE_ATTRIBUTE: usize = 64 * 1024;

/// Message attributes as received.
pub(crate) type Attributes = HashMap<String, MessageAttributeValue>;

/// The neutral view of received attributes: string and number values as
/// headers, the envelope attribute unpacked into `x-parkway-*` headers (and
/// the SQS-specific keys under their own names). Binary values stay on the
/// message only. Never fails: a garbled envelope attribute is ignored and
/// logged by name.
pub(crate) fn to_headers(attrs: Option<&Attributes>) -> Headers {
    let mut out = Headers::new();
    let Some(attrs) = attrs else { return out };
    for (name, value) in attrs {
        if name == ENVELOPE_ATTRIBUTE {
            unpack(value.string_value(), &mut out);
        } else if let Some(s) = value.string_value() {
            if !name.starts_with(HEADER_PREFIX) {
                out.insert(name.as_str(), s);
            }
        }
    }
    out
}

fn unpack(raw: Option<&str>, out: &mut Headers) {
    let Some(raw) = raw.filter(|r| r.len() <= MAX_ENVELOPE_ATTRIBUTE) else {
        tracing::warn!(
            attribute = ENVELOPE_ATTRIBUTE,
            "ignoring an oversized or empty envelope attribute"
        );
        return;
    };
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(raw) else {
        tracing::warn!(
            attribute = ENVELOPE_ATTRIBUTE,
            "ignoring a malformed envelope attribute"
        );
        return;
    };
    for (k, v) in map {
        if let serde_json::Value::String(s) = v {
            if k == DEDUP_KEY {
                out.insert(k, s);
            } else {
                out.insert(format!("{HEADER_PREFIX}{k}"), s);
            }
        }
    }
}

/// Packs the `x-parkway-*` headers (and `extra` SQS keys) into the
/// envelope attribute's JSON text; `None` when there is nothing to carry.
pub(crate) fn pack(headers: &Headers, extra: &[(&str, &str)]) -> Option<String> {
    let mut map = serde_json::Map::new();
    for (k, v) in headers.iter() {
        if let Some(short) = k.strip_prefix(HEADER_PREFIX) {
            map.insert(short.to_owned(), serde_json::Value::String(v.to_owned()));
        }
    }
    for (k, v) in extra {
        map.insert((*k).to_owned(), serde_json::Value::String((*v).to_owned()));
    }
    if map.is_empty() {
        return None;
    }
    serde_json::to_string(&serde_json::Value::Object(map)).ok()
}

fn string_value(v: &str) -> Result<MessageAttributeValue, TransportError> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(v)
        .build()
        .map_err(|e| {
            TransportError::new(
                KIND,
                ErrorKind::Config,
                "could not build a message attribute",
            )
            .with_source(e)
        })
}

/// A copy's attributes: the original's as they are (binary ones too), the
/// envelope attribute replaced by `headers`' envelope (plus `extra`).
pub(crate) fn for_copy(
    original: Option<&Attributes>,
    headers: &Headers,
    extra: &[(&str, &str)],
) -> Result<Attributes, TransportError> {
    let mut out: Attributes = original
        .map(|a| {
            a.iter()
                .filter(|(k, _)| k.as_str() != ENVELOPE_ATTRIBUTE)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    if let Some(packed) = pack(headers, extra) {
        out.insert(ENVELOPE_ATTRIBUTE.to_owned(), string_value(&packed)?);
    }
    check_count(&out)?;
    Ok(out)
}

/// A new message's attributes from neutral headers (the producer side):
/// plain headers become String attributes, `x-parkway-*` ones the envelope.
pub(crate) fn from_headers(headers: &Headers) -> Result<Attributes, TransportError> {
    let mut out = Attributes::new();
    for (k, v) in headers.iter() {
        if !k.starts_with(HEADER_PREFIX) {
            out.insert(k.to_owned(), string_value(v)?);
        }
    }
    if let Some(packed) = pack(headers, &[]) {
        out.insert(ENVELOPE_ATTRIBUTE.to_owned(), string_value(&packed)?);
    }
    check_count(&out)?;
    Ok(out)
}

fn check_count(attrs: &Attributes) -> Result<(), TransportError> {
    if attrs.len() > MAX_ATTRIBUTES {
        return Err(TransportError::new(
            KIND,
            ErrorKind::Refused,
            format!(
                "the message would carry {} attributes; SQS allows {MAX_ATTRIBUTES} (the envelope takes one)",
                attrs.len()
            ),
        ));
    }
    Ok(())
}

/// Bytes SQS counts against its 256 KiB limit.
pub(crate) fn size(body: &str, attrs: &Attributes) -> usize {
    body.len()
        + attrs
            .iter()
            .map(|(k, v)| {
                k.len()
                    + v.data_type().len()
                    + v.string_value().map_or(0, str::len)
                    + v.binary_value().map_or(0, |b| b.as_ref().len())
            })
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use aws_sdk_sqs::primitives::Blob;
    use parkway_core::{Envelope, EnvelopeLimits, envelope::names};
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn envelope_round_trips_through_one_attribute() {
        let mut env = Envelope {
            attempts: 3,
            last_error: Some("boom \"quoted\"\n".into()),
            ..Envelope::default()
        };
        env.message_id = Some("m-1".into());
        let mut h = Headers::new();
        h.insert("tenant", "acme");
        env.encode(&mut h, &EnvelopeLimits::default());
        let attrs = from_headers(&h).unwrap();
        assert_eq!(attrs.len(), 2, "tenant + the envelope");
        let back = to_headers(Some(&attrs));
        assert_eq!(back.get("tenant"), Some("acme"));
        assert_eq!(back.get(names::ATTEMPT), Some("3"));
        let decoded = Envelope::decode(&back);
        assert_eq!(decoded.attempts, 3);
        assert_eq!(decoded.message_id.as_deref(), Some("m-1"));
    }

    #[test]
    fn copies_keep_binary_attributes_and_replace_the_envelope() {
        let mut original = Attributes::new();
        original.insert(
            "blob".into(),
            MessageAttributeValue::builder()
                .data_type("Binary")
                .binary_value(Blob::new(vec![0u8, 159, 146, 150]))
                .build()
                .unwrap(),
        );
        original.insert(
            ENVELOPE_ATTRIBUTE.into(),
            string_value("{\"attempt\":\"9\"}").unwrap(),
        );
        let mut h = Headers::new();
        h.insert(names::ATTEMPT, "2");
        let copy = for_copy(Some(&original), &h, &[(DEDUP_KEY, "d-1")]).unwrap();
        assert_eq!(
            copy["blob"].binary_value().map(|b| b.as_ref().to_vec()),
            Some(vec![0u8, 159, 146, 150])
        );
        let back = to_headers(Some(&copy));
        assert_eq!(back.get(names::ATTEMPT), Some("2"));
        assert_eq!(back.get(DEDUP_KEY), Some("d-1"));
    }

    #[test]
    fn too_many_attributes_are_refused_not_dropped() {
        let mut h = Headers::new();
        for i in 0..10 {
            h.insert(format!("h{i}"), "v");
        }
        h.insert(names::ATTEMPT, "1");
        let e = from_headers(&h).unwrap_err();
        assert!(e.to_string().contains("11 attributes"), "{e}");
    }

    proptest! {
        #[test]
        fn garbage_envelope_attributes_never_panic(raw in ".{0,200}") {
            let mut a = Attributes::new();
            a.insert(ENVELOPE_ATTRIBUTE.into(), string_value(&raw).unwrap());
            let h = to_headers(Some(&a));
            let _ = Envelope::decode(&h);
        }
    }
}
