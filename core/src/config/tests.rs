use proptest::prelude::*;

use super::*;
use crate::{Classifier, Failure, FailureClass, OnExhausted};

const GOOD: &str = r#"
[transport]
kind = "memory"
queue = "orders"

[worker]
concurrency = 8
handler_timeout = "5s"

[envelope]
max_bytes = 2048
max_error_bytes = 512

[classifier]
default = "unknown"
reasons = { DOWNSTREAM_TIMEOUT = "transient", ILLEGAL_BUSINESS_TRANSITION = "permanent-business" }

[policies.create-order]
local_attempts = 2
max_attempts = 5
max_age = "2h"
backoff = { kind = "exponential", initial = "1s", multiplier = 2.0, max = "30m", jitter = "full" }
park_on = ["DESERIALIZATION_FAILED", "UNSUPPORTED_SCHEMA_VERSION", "ILLEGAL_BUSINESS_TRANSITION"]

[policies.crm-sync]
max_attempts = 12
max_age = "1d"
backoff = { kind = "schedule", delays = ["500ms", "5s", "1m", "5m"], jitter = "10%" }
on_exhausted = "discard"

[routes]
"crm.sync" = "crm-sync"
"*" = "create-order"
"#;

#[test]
fn a_full_file_loads() {
    let c = Config::from_toml(GOOD).unwrap();
    assert_eq!(c.transport.kind, "memory");
    assert_eq!(
        c.transport.settings.get("queue").and_then(|v| v.as_str()),
        Some("orders")
    );
    assert_eq!(c.worker.concurrency, 8);
    assert_eq!(c.limits.max_bytes(), 2048);
    let crm = &c.router.route("crm.sync").policy;
    assert_eq!(crm.max_attempts(), 12);
    assert_eq!(crm.on_exhausted(), OnExhausted::Discard);
    let orders = &c.router.route("orders.create").policy;
    assert_eq!(orders.local_attempts(), 2);
    assert_eq!(orders.park_on().len(), 3);
    let f = Failure::new("ILLEGAL_BUSINESS_TRANSITION");
    assert_eq!(
        c.classifier.classify(&f).class,
        FailureClass::PermanentBusiness
    );
}

fn error_for(replace: &str, with: &str) -> ConfigError {
    assert!(GOOD.contains(replace), "{replace}");
    Config::from_toml(&GOOD.replacen(replace, with, 1)).unwrap_err()
}

#[test]
fn errors_name_the_field() {
    let cases = [
        (
            "max_attempts = 5",
            "max_attempts = 0",
            "policies.create-order.max_attempts",
        ),
        (
            "max_attempts = 5",
            "max_attempts = -1",
            "policies.create-order.max_attempts",
        ),
        (
            "max_attempts = 5",
            "max_attempts = \"five\"",
            "policies.create-order.max_attempts",
        ),
        (
            "max_age = \"2h\"",
            "max_age = \"2 fortnights\"",
            "policies.create-order.max_age",
        ),
        (
            "multiplier = 2.0",
            "multiplier = 0.5",
            "policies.create-order.backoff.multiplier",
        ),
        (
            "jitter = \"full\"",
            "jitter = \"wobbly\"",
            "policies.create-order.backoff",
        ),
        (
            "kind = \"exponential\"",
            "kind = \"cubic\"",
            "policies.create-order.backoff",
        ),
        (
            "\"DESERIALIZATION_FAILED\"",
            "\"bad reason\"",
            "policies.create-order.park_on",
        ),
        (
            "local_attempts = 2",
            "local_attemps = 2",
            "policies.create-order",
        ),
        ("\"*\" = \"create-order\"", "\"*\" = \"nope\"", "routes"),
        (
            "\"crm.sync\" = \"crm-sync\"",
            "\"crm.sync\" = \"nope\"",
            "routes.crm.sync",
        ),
        ("concurrency = 8", "concurrency = 0", "worker.concurrency"),
        ("max_bytes = 2048", "max_bytes = 10", "envelope"),
        (
            "default = \"unknown\"",
            "default = \"fatal\"",
            "classifier.default",
        ),
        (
            "on_exhausted = \"discard\"",
            "on_exhausted = \"explode\"",
            "policies.crm-sync.on_exhausted",
        ),
    ];
    for (from, to, field) in cases {
        let e = error_for(from, to);
        assert!(
            e.field().starts_with(field),
            "{from} -> {to}: expected field {field}, got {e}"
        );
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn several_policies_need_a_fallback_route() {
    let e = error_for("\"*\" = \"create-order\"", "");
    assert_eq!(e.field(), "routes");
}

#[test]
fn not_toml_is_a_syntax_error() {
    let e = Config::from_toml("[transport\nkind=").unwrap_err();
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e}");
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        let _ = Config::from_toml(&text);
    }

    #[test]
    fn arbitrary_values_in_a_good_file_never_panic(
        field in proptest::sample::select(vec![
            "max_attempts = 5", "local_attempts = 2", "max_age = \"2h\"", "multiplier = 2.0",
            "max = \"30m\"", "initial = \"1s\"", "concurrency = 8", "max_bytes = 2048",
            "handler_timeout = \"5s\"", "jitter = \"10%\"",
        ]),
        value in prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| format!("{f:?}")),
            "\"[a-z0-9 %.]{0,12}\"",
            Just("[]".to_owned()),
            Just("{}".to_owned()),
            Just("\"18446744073709551615s\"".to_owned()),
            Just("\"-1s\"".to_owned()),
        ],
    ) {
        let key = field.split(" = ").next().unwrap_or_default();
        let text = GOOD.replacen(field, &format!("{key} = {value}"), 1);
        let _ = Config::from_toml(&text);
    }
}
