//! Each publish gets its own return: on the real broker (start it with
//! `scripts/rabbitmq-start`; `PARKWAY_RABBITMQ_URL` overrides the address).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests abort on setup failure

use std::time::Duration;

use futures_util::future::join_all;
use lapin::{
    BasicProperties,
    options::{QueueDeclareOptions, QueueDeleteOptions},
    types::FieldTable,
};
use parkway_core::ErrorKind;

use super::confirmed;
use crate::{RabbitConfig, link::Link};

fn url() -> String {
    std::env::var("PARKWAY_RABBITMQ_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

async fn link() -> Link {
    let config = RabbitConfig::new(url(), "pw-test-returns");
    Link::open(&config, 1).await.unwrap_or_else(|e| {
        panic!(
            "cannot reach RabbitMQ at {}: {e}\n  run scripts/rabbitmq-start first",
            url()
        )
    })
}

/// Routable and unroutable mandatory publishes in flight together: each
/// unroutable one, and only those, reads as refused. (lapin hands a return
/// to whichever confirm completes next on its channel; were returns credited
/// to another publish, a returned retry copy would read as accepted and its
/// original would be acked: a lost message.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_return_is_credited_to_its_own_publish_only() {
    let link = link().await;
    let nonce = fastrand::u64(..);
    let queue = format!("pw-test-returns-{nonce:016x}");
    let missing = format!("pw-test-returns-missing-{nonce:016x}");
    let ch = link.channel().await.unwrap();
    let declare = QueueDeclareOptions {
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(queue.as_str().into(), declare, FieldTable::default())
        .await
        .unwrap();
    let routes: Vec<bool> = (0..600).map(|i| i % 3 != 0).collect();
    let results = join_all(routes.iter().map(|&routable| {
        let key = if routable { &queue } else { &missing };
        confirmed(
            &link,
            "",
            key,
            b"x",
            BasicProperties::default(),
            Duration::from_secs(10),
        )
    }))
    .await;
    let wrong: Vec<String> = routes
        .iter()
        .zip(&results)
        .enumerate()
        .filter_map(|(i, (&routable, result))| match (routable, result) {
            (true, Ok(())) => None,
            (false, Err(e)) if e.kind() == ErrorKind::Refused => None,
            (_, r) => Some(format!("#{i} routable={routable}: {r:?}")),
        })
        .collect();
    let _ = ch
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await;
    assert!(
        wrong.is_empty(),
        "{} of {} publishes got another publish's outcome, e.g. {:?}",
        wrong.len(),
        routes.len(),
        &wrong[..wrong.len().min(3)]
    );
}

/// A channel whose confirm was awaited goes back to the pool; one whose
/// publish was abandoned (a timeout, a cancelled task) may still get that
/// publish's return and confirm, so it is never handed out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_publish_channel_is_never_reused() {
    let link = link().await;
    let lease = link.publish.lease(&link.connection).await.unwrap();
    let settled = lease.channel().unwrap().id();
    lease.settled();
    let lease = link.publish.lease(&link.connection).await.unwrap();
    assert_eq!(
        lease.channel().unwrap().id(),
        settled,
        "a settled channel is reused"
    );
    drop(lease);
    let lease = link.publish.lease(&link.connection).await.unwrap();
    assert_ne!(
        lease.channel().unwrap().id(),
        settled,
        "an abandoned channel came back"
    );
    lease.settled();
    // Publishes cut off by their timeout leave the pool usable.
    for _ in 0..5 {
        let r = confirmed(
            &link,
            "",
            "pw-none",
            b"x",
            BasicProperties::default(),
            Duration::from_nanos(1),
        )
        .await;
        assert_eq!(r.map_err(|e| e.kind()), Err(ErrorKind::Timeout));
    }
    let r = confirmed(
        &link,
        "",
        "pw-test-returns-none",
        b"x",
        BasicProperties::default(),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(
        r.map_err(|e| e.kind()),
        Err(ErrorKind::Refused),
        "an unroutable publish is refused"
    );
}
