//! The scripted handler every scenario uses: its behaviour is driven by the
//! message body, so the same scenario runs unchanged on any transport.
//!
//! Bodies: `ok`, `fail:N` (transient N times, then ok), `bad:REASON`
//! (permanent), `forever` (always transient), `discard` (reason `STALE`,
//! listed in `discard_on`), `dup` (duplicate), `park-once:REASON` (permanent
//! unless the message is a replay).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use parkway::{Envelope, Failure, FailureClass, Handler, Message, Replay};
use tokio::time::Instant;

/// One handler run.
#[derive(Debug, Clone)]
pub struct Run {
    pub at: Instant,
    /// Failed attempts the message's envelope recorded when it arrived.
    pub attempts: u32,
    pub ok: bool,
    pub replay: Option<Replay>,
}

/// What the handler saw, per message id.
#[derive(Debug, Clone, Default)]
pub struct Record {
    runs: Arc<Mutex<HashMap<String, Vec<Run>>>>,
    successes: Arc<Mutex<Vec<String>>>,
}

impl Record {
    pub fn runs(&self, id: &str) -> Vec<Run> {
        self.runs
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .unwrap_or_default()
    }

    pub fn run_count(&self, id: &str) -> usize {
        self.runs(id).len()
    }

    /// Message ids in the order their handler succeeded.
    pub fn successes(&self) -> Vec<String> {
        self.successes.lock().unwrap().clone()
    }

    pub fn succeeded(&self, id: &str) -> usize {
        self.successes().iter().filter(|s| *s == id).count()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Scripted {
    pub record: Record,
}

impl Handler for Scripted {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        let id = msg.id.clone().unwrap_or_default();
        let body = String::from_utf8_lossy(&msg.body).into_owned();
        let envelope = Envelope::decode(&msg.headers);
        let replay = envelope.replay;
        let n = {
            let mut runs = self.record.runs.lock().unwrap();
            let v = runs.entry(id.clone()).or_default();
            v.push(Run {
                at: Instant::now(),
                attempts: envelope.attempts,
                ok: false,
                replay: replay.clone(),
            });
            v.len()
        };
        let result = outcome(&body, n, replay.is_some());
        if result.is_ok() {
            if let Some(run) = self
                .record
                .runs
                .lock()
                .unwrap()
                .get_mut(&id)
                .and_then(|v| v.last_mut())
            {
                run.ok = true;
            }
            self.record.successes.lock().unwrap().push(id);
        }
        result
    }
}

fn outcome(body: &str, run: usize, replayed: bool) -> Result<(), Failure> {
    match body.split_once(':') {
        Some(("fail", k)) if run <= k.parse().unwrap_or(0) => {
            Err(Failure::transient("DOWNSTREAM_TIMEOUT").with_source("scripted timeout"))
        }
        Some(("bad", reason)) => Err(permanent(reason)),
        Some(("park-once", reason)) if !replayed => Err(permanent(reason)),
        _ => {
            match body {
                "forever" => Err(Failure::transient("DOWNSTREAM_UNAVAILABLE")
                    .with_source("503 Service Unavailable")),
                "discard" => Err(Failure::new("STALE")),
                "dup" => Err(Failure::new("ALREADY_APPLIED").with_class(FailureClass::Duplicate)),
                _ => Ok(()),
            }
        }
    }
}

fn permanent(reason: &str) -> Failure {
    let reason = parkway::Reason::parse(reason).unwrap_or(parkway::Reason::UNKNOWN_FAILURE);
    Failure::new(reason)
        .with_class(FailureClass::PermanentTechnical)
        .with_source("scripted permanent failure")
}
