//! A payment-capture handler whose behaviour is driven by the message, so
//! any producer — these examples, or any AMQP / Kafka client — can walk it
//! through every path of the lifecycle.
//!
//! The body is JSON (`{"payment": "p-1", "amount": 10}`) with optional
//! fields:
//!
//! | field | effect |
//! |---|---|
//! | `"timeout": N` | the first N attempts run past the handler timeout (`HANDLER_TIMEOUT`, transient) |
//! | `"fail_transient": N` | the first N attempts fail with `DOWNSTREAM_TIMEOUT` (transient) |
//! | `"fail_forever": true` | every attempt fails with `DOWNSTREAM_UNAVAILABLE` (transient): parked when the budget is spent |
//! | `"reject": "why"` | a business rejection, `ILLEGAL_BUSINESS_TRANSITION`: parked at once |
//! | `"amount": "12.50"` | a JSON mapping error (`DESERIALIZATION_FAILED`, parked at once) until the fix that reads amounts given as strings is deployed ([`Payments::deploy_fix`]) |
//!
//! A body that is not JSON is `DESERIALIZATION_FAILED`. A payment applied
//! once is acknowledged as a duplicate when it comes again (`ALREADY_APPLIED`,
//! class duplicate): replays are idempotent.

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use parkway::{Envelope, Failure, FailureClass, Handler, Message};

/// The handler; clones share state.
#[derive(Debug, Clone, Default)]
pub struct Payments {
    lenient_amounts: Arc<AtomicBool>,
    applied: Arc<Mutex<HashSet<String>>>,
}

impl Payments {
    /// "Deploys" handler v2, which reads amounts given as strings.
    pub fn deploy_fix(&self) {
        self.lenient_amounts.store(true, Ordering::SeqCst);
    }

    /// Payments applied so far.
    pub fn applied(&self) -> usize {
        self.applied.lock().map_or(0, |a| a.len())
    }
}

fn count(v: &serde_json::Value, field: &str) -> u32 {
    v[field]
        .as_u64()
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

impl Handler for Payments {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        let v: serde_json::Value = serde_json::from_slice(&msg.body)
            .map_err(|e| Failure::permanent("DESERIALIZATION_FAILED").with_source(e))?;
        // Failed attempts so far, as the envelope carries them on any broker.
        let before = Envelope::decode(&msg.headers).attempts;
        if before < count(&v, "timeout") {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        if before < count(&v, "fail_transient") {
            return Err(Failure::transient("DOWNSTREAM_TIMEOUT")
                .with_source("payment-gateway: read timed out after 2s"));
        }
        if v["fail_forever"].as_bool() == Some(true) {
            return Err(Failure::transient("DOWNSTREAM_UNAVAILABLE")
                .with_source("payment-gateway: 503 Service Unavailable"));
        }
        if let Some(why) = v["reject"].as_str() {
            return Err(
                Failure::business("ILLEGAL_BUSINESS_TRANSITION").with_source(why.to_owned())
            );
        }
        match &v["amount"] {
            serde_json::Value::String(s) if !self.lenient_amounts.load(Ordering::SeqCst) => {
                return Err(
                    Failure::permanent("DESERIALIZATION_FAILED").with_source(format!(
                        "amount: invalid type: string {s:?}, expected a number"
                    )),
                );
            }
            _ => {}
        }
        let key = v["payment"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| msg.id.clone())
            .unwrap_or_default();
        let fresh = self
            .applied
            .lock()
            .map(|mut a| a.insert(key.clone()))
            .unwrap_or(true);
        if !fresh {
            return Err(Failure::new("ALREADY_APPLIED")
                .with_class(FailureClass::Duplicate)
                .with_source(format!("payment {key} was applied before")));
        }
        Ok(())
    }
}
