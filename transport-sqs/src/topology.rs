//! The source queue and its dead-letter queue, declared or verified.
//!
//! Why a redrive policy when the transport parks explicitly? Explicit
//! parking happens at once and carries the envelope, but only a running
//! worker can do it. A worker that crashes on a message (or is killed while
//! handling it) never settles it; the queue's `RedrivePolicy` moves it to
//! the DLQ by itself after `maxReceiveCount` receives — the policy's
//! attempts plus a margin, so it never pre-empts the policy. The DLQ's
//! `RedriveAllowPolicy` admits only this source, which is also what a
//! native message-move task moves back to.

use std::collections::HashMap;

use aws_sdk_sqs::{Client, types::QueueAttributeName};
use parkway_core::{ErrorKind, TopologyMode, TransportError};

use crate::{KIND, SqsConfig, client::error};

/// SQS's largest `maxReceiveCount`.
pub const MAX_RECEIVE_COUNT: u32 = 1000;
/// DLQ retention: SQS's longest, 14 days.
pub(crate) const DLQ_RETENTION_SECS: u64 = 14 * 24 * 3600;

/// The resolved queues.
#[derive(Debug, Clone)]
pub(crate) struct Queues {
    pub(crate) source_url: String,
    pub(crate) source_arn: String,
    pub(crate) dlq_url: String,
    pub(crate) dlq_arn: String,
    pub(crate) max_receive_count: u32,
}

/// The source queue's `maxReceiveCount` for policies whose largest budget
/// is `max_attempts`: the budget plus `receive_margin`, at most
/// [`MAX_RECEIVE_COUNT`].
pub(crate) fn max_receive_count(config: &SqsConfig, max_attempts: u32) -> u32 {
    max_attempts
        .saturating_add(config.receive_margin)
        .min(MAX_RECEIVE_COUNT)
}

fn topology(detail: String) -> TransportError {
    TransportError::new(KIND, ErrorKind::Topology, detail)
}

/// Declares or verifies the queues; `max_attempts` is the largest attempt
/// budget of the policies served.
pub(crate) async fn ensure(
    client: &Client,
    config: &SqsConfig,
    max_attempts: u32,
) -> Result<Queues, TransportError> {
    let max_receive_count = max_receive_count(config, max_attempts);
    let dlq_name = config.dead_letter_queue_name();
    let dlq_ref = config.dead_letter_queue.clone().unwrap_or(dlq_name);
    match config.topology {
        TopologyMode::Declare => {
            let dlq_url = declare(client, &dlq_ref, config.is_fifo()).await?;
            set(
                client,
                &dlq_url,
                &[(
                    QueueAttributeName::MessageRetentionPeriod,
                    DLQ_RETENTION_SECS.to_string(),
                )],
            )
            .await?;
            let dlq_arn = arn(client, &dlq_url).await?;
            let source_url = declare(client, &config.queue, config.is_fifo()).await?;
            let redrive = serde_json::json!({
                "deadLetterTargetArn": dlq_arn,
                "maxReceiveCount": max_receive_count,
            });
            set(
                client,
                &source_url,
                &[
                    (QueueAttributeName::RedrivePolicy, redrive.to_string()),
                    (
                        QueueAttributeName::VisibilityTimeout,
                        config.visibility_timeout.as_secs().to_string(),
                    ),
                ],
            )
            .await?;
            let source_arn = arn(client, &source_url).await?;
            let allow = serde_json::json!({
                "redrivePermission": "byQueue",
                "sourceQueueArns": [source_arn],
            });
            set(
                client,
                &dlq_url,
                &[(QueueAttributeName::RedriveAllowPolicy, allow.to_string())],
            )
            .await?;
            Ok(Queues {
                source_url,
                source_arn,
                dlq_url,
                dlq_arn,
                max_receive_count,
            })
        }
        // Verify, and any mode added later: check, never create.
        _ => verify(client, config, &dlq_ref, max_attempts).await,
    }
}

async fn verify(
    client: &Client,
    config: &SqsConfig,
    dlq_ref: &str,
    max_attempts: u32,
) -> Result<Queues, TransportError> {
    let dlq_url = lookup(client, dlq_ref).await?;
    let dlq_arn = arn(client, &dlq_url).await?;
    let source_url = lookup(client, &config.queue).await?;
    let attrs = attributes(client, &source_url).await?;
    let source_arn = attrs
        .get(&QueueAttributeName::QueueArn)
        .cloned()
        .ok_or_else(|| topology(format!("queue `{}` has no ARN", config.queue)))?;
    let policy = attrs
        .get(&QueueAttributeName::RedrivePolicy)
        .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
        .ok_or_else(|| {
            topology(format!(
                "queue `{}` has no RedrivePolicy; it must dead-letter to `{dlq_ref}`",
                config.queue
            ))
        })?;
    let target = policy.get("deadLetterTargetArn").and_then(|v| v.as_str());
    if target != Some(dlq_arn.as_str()) {
        return Err(topology(format!(
            "queue `{}` dead-letters to {target:?}, not to `{dlq_ref}` ({dlq_arn})",
            config.queue
        )));
    }
    let count = policy
        .get("maxReceiveCount")
        .and_then(|v| {
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        })
        .unwrap_or(0);
    let max_receive_count = u32::try_from(count).unwrap_or(MAX_RECEIVE_COUNT);
    if max_receive_count <= max_attempts {
        return Err(topology(format!(
            "queue `{}` has maxReceiveCount {count}, not above the policies' max_attempts {max_attempts}: the broker would dead-letter messages before their budget is spent",
            config.queue
        )));
    }
    Ok(Queues {
        source_url,
        source_arn,
        dlq_url,
        dlq_arn,
        max_receive_count,
    })
}

async fn declare(client: &Client, queue: &str, fifo: bool) -> Result<String, TransportError> {
    if queue.contains("://") {
        return lookup(client, queue).await;
    }
    let mut req = client.create_queue().queue_name(queue);
    if fifo {
        req = req.attributes(QueueAttributeName::FifoQueue, "true");
    }
    let out = req
        .send()
        .await
        .map_err(|e| error(&format!("create queue `{queue}`"), e))?;
    out.queue_url()
        .map(str::to_owned)
        .ok_or_else(|| topology(format!("creating `{queue}` returned no URL")))
}

/// A queue's URL: as given, or looked up by name.
async fn lookup(client: &Client, queue: &str) -> Result<String, TransportError> {
    if queue.contains("://") {
        attributes(client, queue).await?;
        return Ok(queue.to_owned());
    }
    let out = client
        .get_queue_url()
        .queue_name(queue)
        .send()
        .await
        .map_err(|e| {
            let mut t = error(&format!("find queue `{queue}`"), e);
            if t.kind() == ErrorKind::Refused {
                t = topology(format!("queue `{queue}` does not exist: {t}"));
            }
            t
        })?;
    out.queue_url()
        .map(str::to_owned)
        .ok_or_else(|| topology(format!("queue `{queue}` has no URL")))
}

async fn attributes(
    client: &Client,
    url: &str,
) -> Result<HashMap<QueueAttributeName, String>, TransportError> {
    let out = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .map_err(|e| error(&format!("read the attributes of `{url}`"), e))?;
    Ok(out.attributes().cloned().unwrap_or_default())
}

async fn arn(client: &Client, url: &str) -> Result<String, TransportError> {
    attributes(client, url)
        .await?
        .remove(&QueueAttributeName::QueueArn)
        .ok_or_else(|| topology(format!("queue `{url}` has no ARN")))
}

async fn set(
    client: &Client,
    url: &str,
    attrs: &[(QueueAttributeName, String)],
) -> Result<(), TransportError> {
    let mut req = client.set_queue_attributes().queue_url(url);
    for (k, v) in attrs {
        req = req.attributes(k.clone(), v);
    }
    req.send()
        .await
        .map_err(|e| error(&format!("set the attributes of `{url}`"), e))?;
    Ok(())
}

/// Deletes both queues (tests and teardown).
pub(crate) async fn delete(client: &Client, queues: &Queues) -> Result<(), TransportError> {
    for url in [&queues.source_url, &queues.dlq_url] {
        client
            .delete_queue()
            .queue_url(url)
            .send()
            .await
            .map_err(|e| error(&format!("delete `{url}`"), e))?;
    }
    Ok(())
}
