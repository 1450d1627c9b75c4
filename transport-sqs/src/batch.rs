//! `DeleteMessageBatch` and `ChangeMessageVisibilityBatch`, with every
//! entry answered on its own.
//!
//! Why batch? At the emulator's (and SQS's) request rates, one delete per
//! message costs as many round trips as the receives that fetched ten at a
//! time. Settlements queue here and each batch call takes up to ten of
//! whatever is waiting — no linger timer, so an idle worker pays no extra
//! latency, and a busy one batches by itself while earlier calls are in
//! flight. A batch can succeed partly: every entry's own result goes back to
//! the one settlement that asked, so a failed entry hands exactly that
//! delivery back and none is lost.

use std::sync::Arc;

use aws_sdk_sqs::{
    Client,
    types::{ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry},
};
use parkway_core::{ErrorKind, TransportError};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::{
    KIND,
    client::{build_error, error},
};

/// SQS's largest batch.
pub(crate) const MAX_BATCH: usize = 10;
/// Batch calls in flight at once per batcher: few, so that settlements
/// queue up behind them and the next call carries a full batch (with 8 the
/// emulator saw mostly single-entry calls and the engine ran at 0.77 of the
/// raw loop; with 2 it is not the limit).
const CONCURRENT_CALLS: usize = 2;

/// What to do with one receipt handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Delete the message.
    Delete,
    /// Set its visibility timeout to this many seconds.
    Visibility(i32),
}

type Reply = oneshot::Sender<Result<(), TransportError>>;

struct Entry {
    receipt: String,
    op: Op,
    reply: Reply,
}

/// Queues settlements of one queue's messages into batch calls.
#[derive(Debug, Clone)]
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<Entry>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}

impl Batcher {
    /// Starts the batching task for `queue_url` (ends when every clone of
    /// the batcher is dropped).
    pub(crate) fn start(client: Client, queue_url: String) -> Batcher {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(client, queue_url, rx));
        Batcher { tx }
    }

    /// Carries out `op` on `receipt` in the next batch; `Ok` once SQS
    /// reported this entry done.
    pub(crate) async fn submit(&self, receipt: &str, op: Op) -> Result<(), TransportError> {
        let (reply, answer) = oneshot::channel();
        let entry = Entry {
            receipt: receipt.to_owned(),
            op,
            reply,
        };
        self.tx.send(entry).map_err(|_| closed())?;
        answer.await.unwrap_or_else(|_| Err(closed()))
    }
}

fn closed() -> TransportError {
    TransportError::new(KIND, ErrorKind::Closed, "the batching task has ended")
}

async fn run(client: Client, url: String, mut rx: mpsc::UnboundedReceiver<Entry>) {
    let calls = Arc::new(Semaphore::new(CONCURRENT_CALLS));
    while let Some(first) = rx.recv().await {
        // Wait for a call slot first: whatever queues meanwhile joins this
        // batch.
        let Ok(permit) = calls.clone().acquire_owned().await else {
            return;
        };
        let mut deletes = Vec::new();
        let mut changes = Vec::new();
        let mut next = Some(first);
        while let Some(e) = next.take() {
            match e.op {
                Op::Delete => deletes.push(e),
                Op::Visibility(_) => changes.push(e),
            }
            if deletes.len() + changes.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            if !deletes.is_empty() {
                delete(&client, &url, deletes).await;
            }
            if !changes.is_empty() {
                change(&client, &url, changes).await;
            }
            drop(permit);
        });
    }
}

/// Answers each entry from a batch result (`ok` ids, `failed` ids with
/// their codes); an entry SQS did not mention is a failure too.
fn answer(entries: Vec<Entry>, ok: &[&str], failed: &[(&str, String)], doing: &str) {
    for (i, e) in entries.into_iter().enumerate() {
        let id = i.to_string();
        let result = if ok.contains(&id.as_str()) {
            Ok(())
        } else if let Some((_, why)) = failed.iter().find(|(f, _)| *f == id) {
            Err(TransportError::new(
                KIND,
                ErrorKind::Refused,
                format!("{doing}: {why}"),
            ))
        } else {
            Err(TransportError::new(
                KIND,
                ErrorKind::Refused,
                format!("{doing}: SQS did not report this entry"),
            ))
        };
        let _ = e.reply.send(result);
    }
}

fn fail_all(entries: Vec<Entry>, e: &TransportError) {
    for entry in entries {
        let _ = entry.reply.send(Err(TransportError::new(
            e.transport(),
            e.kind(),
            e.to_string(),
        )));
    }
}

/// The failed entries of a batch answer: id, and SQS's code and message.
fn failures(failed: &[aws_sdk_sqs::types::BatchResultErrorEntry]) -> Vec<(&str, String)> {
    failed
        .iter()
        .map(|f| {
            (
                f.id(),
                format!("{} {}", f.code(), f.message().unwrap_or("")),
            )
        })
        .collect()
}

async fn delete(client: &Client, url: &str, entries: Vec<Entry>) {
    let mut req = client.delete_message_batch().queue_url(url);
    for (i, e) in entries.iter().enumerate() {
        match DeleteMessageBatchRequestEntry::builder()
            .id(i.to_string())
            .receipt_handle(&e.receipt)
            .build()
        {
            Ok(entry) => req = req.entries(entry),
            Err(b) => return fail_all(entries, &build_error("build a delete entry", b)),
        }
    }
    match req.send().await {
        Ok(out) => {
            let ok: Vec<&str> = out.successful().iter().map(|s| s.id()).collect();
            let failed = failures(out.failed());
            metrics::counter!("parkway_sqs_batch_calls_total", "op" => "delete").increment(1);
            answer(entries, &ok, &failed, "delete");
        }
        Err(e) => fail_all(entries, &error("delete a batch", e)),
    }
}

async fn change(client: &Client, url: &str, entries: Vec<Entry>) {
    let mut req = client.change_message_visibility_batch().queue_url(url);
    for (i, e) in entries.iter().enumerate() {
        let secs = match e.op {
            Op::Visibility(s) => s,
            Op::Delete => 0,
        };
        match ChangeMessageVisibilityBatchRequestEntry::builder()
            .id(i.to_string())
            .receipt_handle(&e.receipt)
            .visibility_timeout(secs)
            .build()
        {
            Ok(entry) => req = req.entries(entry),
            Err(b) => return fail_all(entries, &build_error("build a visibility entry", b)),
        }
    }
    match req.send().await {
        Ok(out) => {
            let ok: Vec<&str> = out.successful().iter().map(|s| s.id()).collect();
            let failed = failures(out.failed());
            metrics::counter!("parkway_sqs_batch_calls_total", "op" => "visibility").increment(1);
            answer(entries, &ok, &failed, "change visibility");
        }
        Err(e) => fail_all(entries, &error("change visibility of a batch", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_entry_gets_its_own_answer() {
        let mut entries = Vec::new();
        let mut answers = Vec::new();
        for i in 0..3 {
            let (reply, answer) = oneshot::channel();
            entries.push(Entry {
                receipt: format!("r{i}"),
                op: Op::Delete,
                reply,
            });
            answers.push(answer);
        }
        // Entry 0 succeeded, 1 failed, 2 was not mentioned at all.
        answer(
            entries,
            &["0"],
            &[("1", "ReceiptHandleIsInvalid gone".into())],
            "delete",
        );
        let mut results = Vec::new();
        for a in answers {
            results.push(a.await.unwrap());
        }
        assert!(results[0].is_ok());
        let e1 = results[1].as_ref().unwrap_err().to_string();
        assert!(e1.contains("ReceiptHandleIsInvalid"), "{e1}");
        let e2 = results[2].as_ref().unwrap_err().to_string();
        assert!(e2.contains("did not report"), "{e2}");
    }

    #[test]
    fn a_failed_call_fails_every_entry_with_its_kind() {
        let (reply, mut answer) = oneshot::channel();
        let e = TransportError::new(KIND, ErrorKind::Timeout, "no answer");
        fail_all(
            vec![Entry {
                receipt: "r".into(),
                op: Op::Visibility(3),
                reply,
            }],
            &e,
        );
        let got = answer.try_recv().unwrap().unwrap_err();
        assert_eq!(got.kind(), ErrorKind::Timeout);
    }
}
