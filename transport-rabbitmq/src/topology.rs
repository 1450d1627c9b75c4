//! Declaring (or verifying) the work exchange and queue, the parking queue
//! and the wait queues of the delay tiers.

use std::time::Duration;

use lapin::{
    ExchangeKind,
    options::{
        ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions,
        QueueDeleteOptions,
    },
    types::{AMQPValue, FieldTable, LongString},
};
use parkway_core::{ErrorKind, TransportError};

use crate::{
    KIND, Names, QueueType, RabbitConfig,
    link::{Link, close_quietly, lapin_error, short},
};

fn long(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// Arguments every queue of this topology shares.
fn base_args(config: &RabbitConfig) -> FieldTable {
    let mut args = FieldTable::default();
    if config.queue_type == QueueType::Quorum {
        args.insert("x-queue-type".into(), long("quorum"));
    }
    args
}

/// Quorum queues dead-letter at least once only with `reject-publish`.
fn at_least_once(config: &RabbitConfig, args: &mut FieldTable) {
    if config.queue_type == QueueType::Quorum {
        args.insert("x-dead-letter-strategy".into(), long("at-least-once"));
        args.insert("x-overflow".into(), long("reject-publish"));
    }
}

pub(crate) fn work_args(config: &RabbitConfig, names: &Names, ordered: bool) -> FieldTable {
    let mut args = base_args(config);
    // Whatever the broker dead-letters by itself (delivery limit, rejects)
    // lands in the parking lot, not in the void.
    args.insert("x-dead-letter-exchange".into(), long(""));
    args.insert("x-dead-letter-routing-key".into(), long(&names.parking));
    at_least_once(config, &mut args);
    if let Some(limit) = config.delivery_limit {
        args.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongLongInt(i64::from(limit)),
        );
    }
    if ordered {
        args.insert("x-single-active-consumer".into(), AMQPValue::Boolean(true));
    }
    args
}

pub(crate) fn wait_args(config: &RabbitConfig, names: &Names, tier: Duration) -> FieldTable {
    let mut args = base_args(config);
    let ttl = i64::try_from(tier.as_millis()).unwrap_or(i64::MAX);
    args.insert("x-message-ttl".into(), AMQPValue::LongLongInt(ttl));
    args.insert("x-dead-letter-exchange".into(), long(&names.exchange));
    args.insert("x-dead-letter-routing-key".into(), long(&names.routing_key));
    at_least_once(config, &mut args);
    args
}

fn durable() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    }
}

/// Declares the fixed part of the topology (idempotent).
pub(crate) async fn declare(
    link: &Link,
    config: &RabbitConfig,
    names: &Names,
    ordered: bool,
) -> Result<(), TransportError> {
    let ch = link.channel().await?;
    let ex_opts = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    ch.exchange_declare(
        short(&names.exchange)?,
        ExchangeKind::Direct,
        ex_opts,
        FieldTable::default(),
    )
    .await
    .map_err(|e| lapin_error(&format!("declare exchange `{}`", names.exchange), e))?;
    ch.queue_declare(short(&names.parking)?, durable(), base_args(config))
        .await
        .map_err(|e| lapin_error(&format!("declare parking queue `{}`", names.parking), e))?;
    ch.queue_declare(
        short(&names.queue)?,
        durable(),
        work_args(config, names, ordered),
    )
    .await
    .map_err(|e| lapin_error(&format!("declare work queue `{}`", names.queue), e))?;
    ch.queue_bind(
        short(&names.queue)?,
        short(&names.exchange)?,
        short(&names.routing_key)?,
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .map_err(|e| {
        lapin_error(
            &format!("bind `{}` to `{}`", names.queue, names.exchange),
            e,
        )
    })?;
    close_quietly(&ch, "declared").await;
    Ok(())
}

/// Declares one wait queue.
pub(crate) async fn declare_wait(
    link: &Link,
    config: &RabbitConfig,
    names: &Names,
    tier: Duration,
) -> Result<(), TransportError> {
    let ch = link.channel().await?;
    let name = names.wait(tier);
    ch.queue_declare(short(&name)?, durable(), wait_args(config, names, tier))
        .await
        .map_err(|e| lapin_error(&format!("declare wait queue `{name}`"), e))?;
    close_quietly(&ch, "declared").await;
    Ok(())
}

/// Checks, with passive declares only, that every piece exists; names the
/// first missing one.
pub(crate) async fn verify(
    link: &Link,
    names: &Names,
    tiers: &[Duration],
) -> Result<(), TransportError> {
    let missing = |what: String| {
        TransportError::new(
            KIND,
            ErrorKind::Topology,
            format!(
                "{what} is missing (topology = \"verify\"): declare it, or run with topology = \"declare\""
            ),
        )
    };
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let ch = link.channel().await?;
    let ex = ExchangeDeclareOptions {
        passive: true,
        ..ExchangeDeclareOptions::default()
    };
    ch.exchange_declare(
        short(&names.exchange)?,
        ExchangeKind::Direct,
        ex,
        FieldTable::default(),
    )
    .await
    .map_err(|_| missing(format!("exchange `{}`", names.exchange)))?;
    let queues = [names.queue.clone(), names.parking.clone()]
        .into_iter()
        .chain(tiers.iter().map(|t| names.wait(*t)));
    for q in queues {
        // A failed passive declare closes the channel: use one per check.
        let ch = link.channel().await?;
        ch.queue_declare(short(&q)?, passive, FieldTable::default())
            .await
            .map_err(|_| missing(format!("queue `{q}`")))?;
        close_quietly(&ch, "verified").await;
    }
    Ok(())
}

/// Deletes everything this topology declared (for tests and teardown).
pub(crate) async fn delete(
    link: &Link,
    names: &Names,
    tiers: &[Duration],
) -> Result<(), TransportError> {
    let queues = [names.queue.clone(), names.parking.clone()]
        .into_iter()
        .chain(tiers.iter().map(|t| names.wait(*t)));
    for q in queues {
        let ch = link.channel().await?;
        let _ = ch
            .queue_delete(short(&q)?, QueueDeleteOptions::default())
            .await;
    }
    let ch = link.channel().await?;
    let _ = ch
        .exchange_delete(short(&names.exchange)?, ExchangeDeleteOptions::default())
        .await;
    Ok(())
}
