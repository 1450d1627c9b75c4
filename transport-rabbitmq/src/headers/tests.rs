use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use parkway_core::{Envelope, Headers, envelope::names};
use proptest::prelude::*;

use super::*;
use crate::{Names, RabbitConfig};

fn names_for_tests() -> Names {
    Names::new(&RabbitConfig::new("amqp://h", "orders"))
}

fn death(queue: &str, reason: &str, count: i64) -> AMQPValue {
    let mut d = FieldTable::default();
    d.insert(
        "queue".into(),
        AMQPValue::LongString(LongString::from(queue)),
    );
    d.insert(
        "reason".into(),
        AMQPValue::LongString(LongString::from(reason)),
    );
    d.insert("count".into(), AMQPValue::LongLongInt(count));
    d.insert("time".into(), AMQPValue::Timestamp(1_780_000_000));
    AMQPValue::FieldTable(d)
}

fn table_with_deaths(deaths: Vec<AMQPValue>) -> FieldTable {
    let mut t = FieldTable::default();
    t.insert(
        "x-death".into(),
        AMQPValue::FieldArray(FieldArray::from(deaths)),
    );
    t
}

#[test]
fn counts_expirations_from_our_wait_queues_only() {
    let t = table_with_deaths(vec![
        death("orders.wait.200ms", "expired", 2),
        death("orders.wait.1000ms", "expired", 1),
        death("someone.elses.queue", "expired", 9),
    ]);
    let c = broker_count(Some(&t), &names_for_tests());
    assert_eq!(c.expired_from_wait, 3);
    assert_eq!(c.attempts(), 3);
    assert_eq!(
        c.dead_lettered.as_ref().map(|d| d.0.as_str()),
        Some("expired")
    );
}

#[test]
fn broker_dead_lettered_messages_are_understood_when_parked() {
    let mut t = table_with_deaths(vec![death("orders", "delivery_limit", 1)]);
    t.insert("x-delivery-count".into(), AMQPValue::LongUInt(20));
    let count = broker_count(Some(&t), &names_for_tests());
    let mut env = Envelope::decode(&to_headers(Some(&t)));
    understand_broker_parking(&mut env, &count);
    assert_eq!(env.reason.unwrap().as_str(), "BROKER_DELIVERY_LIMIT");
    assert_eq!(env.attempts, 20);
    assert_eq!(env.origin.queue.as_deref(), Some("orders"));
    assert!(env.first_failure_at.is_some());
}

#[test]
fn copies_keep_typed_headers_and_replace_the_envelope() {
    let mut original = FieldTable::default();
    original.insert("tenant-id".into(), AMQPValue::LongLongInt(42));
    original.insert(
        "x-parkway-attempt".into(),
        AMQPValue::LongString(LongString::from("7")),
    );
    original.insert("x-delivery-count".into(), AMQPValue::LongUInt(3));
    let mut h = Headers::new();
    h.insert(names::ATTEMPT, "2");
    h.insert("not-ours", "ignored");
    let copy = for_copy(Some(&original), &h);
    assert_eq!(
        copy.inner().get("tenant-id"),
        Some(&AMQPValue::LongLongInt(42))
    );
    assert_eq!(to_headers(Some(&copy)).get(names::ATTEMPT), Some("2"));
    assert!(!copy.contains_key("x-delivery-count"));
    assert!(!copy.contains_key("not-ours"));
}

#[test]
fn fit_drops_the_largest_foreign_headers_first() {
    let mut t = FieldTable::default();
    t.insert(
        "huge".into(),
        AMQPValue::LongString(LongString::from(vec![b'x'; 100_000])),
    );
    t.insert("small".into(), AMQPValue::LongString(LongString::from("s")));
    t.insert(
        ShortString::from("x-parkway-attempt"),
        AMQPValue::LongString(LongString::from("3")),
    );
    let dropped = fit(&mut t, 1000);
    assert_eq!(dropped, ["huge"]);
    assert!(t.contains_key("small") && t.contains_key("x-parkway-attempt"));
}

fn arb_value() -> impl Strategy<Value = AMQPValue> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(AMQPValue::LongLongInt),
        any::<u32>().prop_map(AMQPValue::LongUInt),
        any::<bool>().prop_map(AMQPValue::Boolean),
        ".{0,20}".prop_map(|s| AMQPValue::LongString(LongString::from(s))),
        proptest::collection::vec(any::<u8>(), 0..20)
            .prop_map(|b| AMQPValue::LongString(LongString::from(b))),
        Just(AMQPValue::Void),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4)
                .prop_map(|v| AMQPValue::FieldArray(FieldArray::from(v))),
            proptest::collection::vec(
                (
                    prop_oneof![
                        Just("queue"),
                        Just("reason"),
                        Just("count"),
                        Just("time"),
                        Just("x")
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(|kv| {
                let mut t = FieldTable::default();
                for (k, v) in kv {
                    t.insert(k.into(), v);
                }
                AMQPValue::FieldTable(t)
            }),
        ]
    })
}

proptest! {
    /// Forged or garbled `x-death` / `x-delivery-count` never panic.
    #[test]
    fn garbage_broker_headers_never_panic(
        kv in proptest::collection::vec(
            (prop_oneof![Just("x-death"), Just("x-delivery-count"), Just("x-parkway-attempt"), Just("other")], arb_value()),
            0..6,
        ),
    ) {
        let mut t = FieldTable::default();
        for (k, v) in kv {
            t.insert(k.into(), v);
        }
        let c = broker_count(Some(&t), &names_for_tests());
        prop_assert!(c.attempts() <= 2_000_000);
        let mut env = Envelope::decode(&to_headers(Some(&t)));
        understand_broker_parking(&mut env, &c);
        let copy = for_copy(Some(&t), &Headers::new());
        let _ = approx_size(&copy);
    }
}

#[test]
fn the_publish_id_is_the_transports_not_the_messages() {
    let mut t = FieldTable::default();
    t.insert(PUBLISH_ID.into(), AMQPValue::LongLongInt(7));
    t.insert(
        "tenant".into(),
        AMQPValue::LongString(LongString::from("acme")),
    );
    let seen = to_headers(Some(&t));
    assert_eq!(seen.get("tenant"), Some("acme"));
    assert_eq!(
        seen.get(PUBLISH_ID),
        None,
        "handlers never see the publish id"
    );
    let copy = for_copy(Some(&t), &Headers::new());
    assert!(
        copy.inner().get(PUBLISH_ID).is_none(),
        "a copy gets its own id when published"
    );
}
