//! Kafka record headers ↔ Parkway's neutral headers, and Spring Kafka's
//! dead-letter headers.

use std::time::{Duration, UNIX_EPOCH};

use parkway_core::{Envelope, FailureClass, Headers, Reason, envelope::HEADER_PREFIX};
use rdkafka::message::{Header, Headers as KafkaHeaders, OwnedHeaders};

/// Longest header value taken into the neutral view.
const MAX_VALUE: usize = 64 * 1024;

/// The neutral view: UTF-8 values only (others stay on the record).
pub(crate) fn to_headers(h: Option<&OwnedHeaders>) -> Headers {
    h.map(|h| read(h).0).unwrap_or_default()
}

/// The neutral view of a record's headers, and whether it is lossless:
/// every value UTF-8, present and at most 64 KiB, and no name repeated.
/// Only a lossy view needs the record's own headers kept beside it, so its
/// copies carry them byte for byte.
pub(crate) fn read<H: KafkaHeaders>(h: &H) -> (Headers, bool) {
    // Sized exactly (headers are parsed already; a second pass is cheap):
    // the map is filled without growing.
    let bytes = h
        .iter()
        .map(|x| x.key.len() + x.value.map_or(0, <[u8]>::len))
        .sum();
    let mut out = Headers::with_room(h.count(), bytes);
    let mut lossless = true;
    for header in h.iter() {
        let value = header
            .value
            .filter(|v| v.len() <= MAX_VALUE)
            .and_then(|v| std::str::from_utf8(v).ok());
        match value {
            Some(v) => lossless &= out.insert(header.key, v).is_none(),
            None => lossless = false,
        }
    }
    (out, lossless)
}

/// A copy's headers when the record's own were kept only if the neutral
/// view was lossy: `headers` (the neutral view with the new envelope) is
/// then the whole set.
pub(crate) fn copy_of(raw: Option<&OwnedHeaders>, headers: &Headers) -> OwnedHeaders {
    match raw {
        Some(raw) => for_copy(Some(raw), headers),
        None => from_headers(headers),
    }
}

/// A copy's headers: the original's, byte for byte, with the `x-parkway-*`
/// ones replaced by `headers`'.
pub(crate) fn for_copy(original: Option<&OwnedHeaders>, headers: &Headers) -> OwnedHeaders {
    let mut out = OwnedHeaders::new();
    if let Some(h) = original {
        for header in h.iter().filter(|h| !h.key.starts_with(HEADER_PREFIX)) {
            out = out.insert(Header {
                key: header.key,
                value: header.value,
            });
        }
    }
    for (k, v) in headers.iter().filter(|(k, _)| k.starts_with(HEADER_PREFIX)) {
        out = out.insert(Header {
            key: k,
            value: Some(v.as_bytes()),
        });
    }
    out
}

/// New records from a neutral message (the producer side).
pub(crate) fn from_headers(headers: &Headers) -> OwnedHeaders {
    headers.iter().fold(OwnedHeaders::new(), |out, (k, v)| {
        out.insert(Header {
            key: k,
            value: Some(v.as_bytes()),
        })
    })
}

fn raw<'a>(h: &'a OwnedHeaders, key: &str) -> Option<&'a [u8]> {
    h.iter()
        .filter(|x| x.key == key)
        .filter_map(|x| x.value)
        .last()
}

/// Spring writes numbers big-endian; some tools write them as text.
fn int(bytes: &[u8]) -> Option<i64> {
    match bytes.len() {
        4 => Some(i64::from(i32::from_be_bytes(bytes.try_into().ok()?))),
        8 => Some(i64::from_be_bytes(bytes.try_into().ok()?)),
        _ => std::str::from_utf8(bytes).ok()?.trim().parse().ok(),
    }
}

/// A dead-letter record written by a Spring Kafka application has no
/// Parkway envelope but `kafka_dlt-*` headers: fill the envelope from them
/// so it can be browsed, filtered and redriven like ours.
pub(crate) fn understand_spring(env: &mut Envelope, h: Option<&OwnedHeaders>) {
    let Some(h) = h else { return };
    let Some(topic) = raw(h, "kafka_dlt-original-topic").and_then(|v| std::str::from_utf8(v).ok())
    else {
        return;
    };
    if env.origin.queue.is_none() {
        env.origin.queue = Some(topic.to_owned());
        env.origin.partition = raw(h, "kafka_dlt-original-partition")
            .and_then(int)
            .and_then(|p| i32::try_from(p).ok())
            .filter(|p| *p >= 0);
        env.origin.offset = raw(h, "kafka_dlt-original-offset")
            .and_then(int)
            .filter(|o| *o >= 0);
    }
    if env.reason.is_none() {
        let fqcn = raw(h, "kafka_dlt-exception-fqcn")
            .and_then(|v| std::str::from_utf8(v).ok())
            .unwrap_or("SPRING_DLT");
        env.reason = Some(
            Reason::parse(fqcn).unwrap_or_else(|_| Reason::from_static("SPRING_DLT").sanitized()),
        );
        env.class.get_or_insert(FailureClass::Unknown);
        env.attempts = env.attempts.max(1);
    }
    if env.last_error.is_none() {
        env.last_error = raw(h, "kafka_dlt-exception-message")
            .map(|v| String::from_utf8_lossy(&v[..v.len().min(16 * 1024)]).into_owned());
    }
    if env.first_failure_at.is_none() {
        env.first_failure_at = raw(h, "kafka_dlt-original-timestamp")
            .and_then(int)
            .and_then(|ms| u64::try_from(ms).ok())
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
        env.last_failure_at = env.first_failure_at;
    }
}

#[cfg(test)]
mod tests {
    use parkway_core::envelope::names;
    use proptest::prelude::*;

    use super::*;

    fn spring() -> OwnedHeaders {
        OwnedHeaders::new()
            .insert(Header {
                key: "kafka_dlt-original-topic",
                value: Some("payments".as_bytes()),
            })
            .insert(Header {
                key: "kafka_dlt-original-partition",
                value: Some(&2i32.to_be_bytes()[..]),
            })
            .insert(Header {
                key: "kafka_dlt-original-offset",
                value: Some(&41i64.to_be_bytes()[..]),
            })
            .insert(Header {
                key: "kafka_dlt-exception-fqcn",
                value: Some("java.lang.IllegalStateException".as_bytes()),
            })
            .insert(Header {
                key: "kafka_dlt-exception-message",
                value: Some("balance below zero".as_bytes()),
            })
    }

    #[test]
    fn spring_dead_letters_are_understood() {
        let h = spring();
        let mut env = Envelope::decode(&to_headers(Some(&h)));
        understand_spring(&mut env, Some(&h));
        assert_eq!(env.origin.queue.as_deref(), Some("payments"));
        assert_eq!(env.origin.partition, Some(2));
        assert_eq!(env.origin.offset, Some(41));
        assert_eq!(
            env.reason.unwrap().as_str(),
            "java.lang.IllegalStateException"
        );
        assert_eq!(env.last_error.as_deref(), Some("balance below zero"));
    }

    #[test]
    fn copies_keep_foreign_bytes_and_replace_the_envelope() {
        let original = OwnedHeaders::new()
            .insert(Header {
                key: "binary",
                value: Some(&[0u8, 159, 146, 150][..]),
            })
            .insert(Header {
                key: names::ATTEMPT,
                value: Some("9".as_bytes()),
            });
        let mut h = Headers::new();
        h.insert(names::ATTEMPT, "2");
        let copy = for_copy(Some(&original), &h);
        assert_eq!(raw(&copy, "binary"), Some(&[0u8, 159, 146, 150][..]));
        assert_eq!(to_headers(Some(&copy)).get(names::ATTEMPT), Some("2"));
        assert_eq!(copy.count(), 2);
    }

    proptest! {
        #[test]
        fn garbage_spring_headers_never_panic(
            kv in proptest::collection::vec(
                (prop_oneof![
                    Just("kafka_dlt-original-topic"), Just("kafka_dlt-original-partition"),
                    Just("kafka_dlt-original-offset"), Just("kafka_dlt-exception-fqcn"),
                    Just("kafka_dlt-original-timestamp"), Just("x-parkway-attempt"),
                ], proptest::collection::vec(any::<u8>(), 0..12)),
                0..8,
            ),
        ) {
            let h = kv.iter().fold(OwnedHeaders::new(), |h, (k, v)| h.insert(Header { key: k, value: Some(&v[..]) }));
            let mut env = Envelope::decode(&to_headers(Some(&h)));
            understand_spring(&mut env, Some(&h));
            let _ = for_copy(Some(&h), &Headers::new());
        }

        /// Keeping only the neutral view of a lossless record loses
        /// nothing: its copies carry the same headers as copies made from
        /// the record's own.
        #[test]
        fn a_lossless_view_makes_the_same_copies(
            kv in proptest::collection::vec(
                (prop_oneof![Just("a"), Just("b"), Just("message-id"), Just("x-parkway-attempt")],
                 proptest::option::of(prop_oneof![
                     "[a-z0-9]{0,8}".prop_map(String::into_bytes),
                     proptest::collection::vec(any::<u8>(), 0..6),
                 ])),
                0..6,
            ),
            attempt in 1u32..9,
        ) {
            let h = kv.iter().fold(OwnedHeaders::new(), |h, (k, v)| h.insert(Header { key: k, value: v.as_deref() }));
            let (neutral, lossless) = read(&h);
            let mut settle = neutral.clone();
            settle.insert(names::ATTEMPT, attempt.to_string());
            let sorted = |o: &OwnedHeaders| {
                let mut v: Vec<(String, Option<Vec<u8>>)> = o.iter().map(|x| (x.key.to_owned(), x.value.map(<[u8]>::to_vec))).collect();
                v.sort();
                v
            };
            let kept = copy_of((!lossless).then_some(&h), &settle);
            prop_assert_eq!(sorted(&kept), sorted(&for_copy(Some(&h), &settle)));
            if lossless {
                prop_assert_eq!(neutral.len(), h.count());
            }
        }
    }
}
