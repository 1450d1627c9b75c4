//! How parked messages are shown: a table grouped by reason, details, and
//! JSON for scripts.

use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime},
};

use parkway::Parked;
use serde_json::{Value, json};

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum Output {
    /// Readable text.
    #[default]
    Table,
    /// JSON on stdout.
    Json,
}

/// The reason a parked message is grouped under.
fn reason(p: &Parked) -> String {
    p.envelope
        .reason
        .as_ref()
        .map_or_else(|| "(no reason)".to_owned(), ToString::to_string)
}

/// Queue or topic, with partition and offset where there are some.
fn origin(p: &Parked) -> String {
    let o = &p.envelope.origin;
    let mut s = o.queue.clone().unwrap_or_else(|| p.message.route.clone());
    if let Some(part) = o.partition {
        s.push_str(&format!("[{part}]"));
    }
    if let Some(off) = o.offset {
        s.push_str(&format!("@{off}"));
    }
    s
}

/// Time since the first failure (or since parking, if the envelope has none).
fn age(p: &Parked, now: SystemTime) -> Option<Duration> {
    p.envelope.age(now).or_else(|| {
        p.parked_at
            .map(|t| now.duration_since(t).unwrap_or_default())
    })
}

fn short_age(d: Option<Duration>) -> String {
    let Some(d) = d else {
        return "-".to_owned();
    };
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86_400, s % 86_400 / 3600),
    }
}

fn message_id(p: &Parked) -> String {
    p.message
        .id
        .clone()
        .or_else(|| p.envelope.message_id.clone())
        .unwrap_or_else(|| "-".to_owned())
}

/// Messages grouped by reason, most frequent reason first.
fn grouped(parked: &[Parked]) -> Vec<(String, Vec<&Parked>)> {
    let mut groups: BTreeMap<String, Vec<&Parked>> = BTreeMap::new();
    for p in parked {
        groups.entry(reason(p)).or_default().push(p);
    }
    let mut v: Vec<_> = groups.into_iter().collect();
    v.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    v
}

/// The table: one block per reason with its count.
pub(crate) fn table(parked: &[Parked], scanned: usize, now: SystemTime) -> String {
    let mut out = String::new();
    let groups = grouped(parked);
    for (reason, items) in &groups {
        out.push_str(&format!("{reason} — {} message(s)\n", items.len()));
        out.push_str(&format!(
            "  {:<20} {:>8}  {:>8}  {:<28} {}\n",
            "CLASS", "ATTEMPTS", "AGE", "MESSAGE ID", "ORIGIN"
        ));
        for p in items {
            out.push_str(&format!(
                "  {:<20} {:>8}  {:>8}  {:<28} {}\n",
                p.envelope
                    .class
                    .map_or_else(|| "-".to_owned(), |c| c.to_string()),
                p.envelope.attempts,
                short_age(age(p, now)),
                message_id(p),
                origin(p)
            ));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "{} parked message(s) match, in {} reason(s); {} in the parking lot\n",
        parked.len(),
        groups.len(),
        scanned
    ));
    out
}

fn time(t: Option<SystemTime>) -> Value {
    t.map_or(Value::Null, |t| {
        json!(humantime::format_rfc3339_millis(t).to_string())
    })
}

/// One parked message as JSON; `detail` adds the headers, and `body` the
/// body (as UTF-8 text, or lossy if it is not).
pub(crate) fn json_one(p: &Parked, now: SystemTime, detail: bool, body: bool) -> Value {
    let e = &p.envelope;
    let mut v = json!({
        "parked_id": p.id,
        "message_id": message_id(p),
        "reason": e.reason.as_ref().map(ToString::to_string),
        "class": e.class.map(|c| c.to_string()),
        "attempts": e.attempts,
        "age_seconds": age(p, now).map(|d| d.as_secs()),
        "first_failure_at": time(e.first_failure_at),
        "last_failure_at": time(e.last_failure_at),
        "parked_at": time(p.parked_at),
        "origin": {
            "queue": e.origin.queue,
            "partition": e.origin.partition,
            "offset": e.origin.offset,
        },
        "correlation_id": p.message.correlation_id.clone().or_else(|| e.correlation_id.clone()),
        "message_type": p.message.message_type.clone().or_else(|| e.message_type.clone()),
        "last_error": e.last_error,
        "handler_version": e.handler_version,
        "replay": e.replay.as_ref().map(|r| json!({
            "id": r.id, "by": r.by, "reason": r.reason, "original_attempts": r.original_attempts,
        })),
        "body_bytes": p.message.body.len(),
    });
    if detail {
        let headers: BTreeMap<&str, &str> = p.message.headers.iter().collect();
        v["headers"] = json!(headers);
    }
    if body {
        v["body"] = json!(String::from_utf8_lossy(&p.message.body));
    }
    v
}

/// The list as JSON: counts by reason and the messages.
pub(crate) fn json_list(parked: &[Parked], scanned: usize, now: SystemTime) -> Value {
    let by_reason: BTreeMap<String, usize> = grouped(parked)
        .into_iter()
        .map(|(r, items)| (r, items.len()))
        .collect();
    json!({
        "matched": parked.len(),
        "scanned": scanned,
        "by_reason": by_reason,
        "messages": parked.iter().map(|p| json_one(p, now, false, false)).collect::<Vec<_>>(),
    })
}

/// Every detail of one message, as text.
pub(crate) fn detail(p: &Parked, now: SystemTime, body: bool) -> String {
    let e = &p.envelope;
    let t = |t: Option<SystemTime>| {
        t.map_or_else(
            || "-".to_owned(),
            |t| humantime::format_rfc3339_millis(t).to_string(),
        )
    };
    let mut out = format!("parked message {} (parked id {})\n", message_id(p), p.id);
    let mut row = |k: &str, v: String| out.push_str(&format!("  {k:<16} {v}\n"));
    row("reason", reason(p));
    row(
        "class",
        e.class.map_or_else(|| "-".to_owned(), |c| c.to_string()),
    );
    row("attempts", e.attempts.to_string());
    row("age", short_age(age(p, now)));
    row("first failure", t(e.first_failure_at));
    row("last failure", t(e.last_failure_at));
    row("parked at", t(p.parked_at));
    row("origin", origin(p));
    row(
        "correlation id",
        p.message
            .correlation_id
            .clone()
            .or_else(|| e.correlation_id.clone())
            .unwrap_or_else(|| "-".to_owned()),
    );
    row(
        "message type",
        p.message
            .message_type
            .clone()
            .or_else(|| e.message_type.clone())
            .unwrap_or_else(|| "-".to_owned()),
    );
    row(
        "handler version",
        e.handler_version.clone().unwrap_or_else(|| "-".to_owned()),
    );
    row(
        "last error",
        e.last_error.clone().unwrap_or_else(|| "-".to_owned()),
    );
    if let Some(r) = &e.replay {
        row(
            "replayed",
            format!(
                "{} by {} ({}), {} attempt(s) before",
                r.id, r.by, r.reason, r.original_attempts
            ),
        );
    }
    row("body", format!("{} byte(s)", p.message.body.len()));
    out.push_str("  headers:\n");
    let mut headers: Vec<(&str, &str)> = p.message.headers.iter().collect();
    headers.sort_unstable();
    for (k, v) in headers {
        out.push_str(&format!("    {k}: {v}\n"));
    }
    if body {
        out.push_str("  body:\n");
        out.push_str(&format!(
            "    {}\n",
            String::from_utf8_lossy(&p.message.body)
        ));
    }
    out
}
