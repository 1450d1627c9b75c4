//! Each publish gets its own return: on the real broker (start it with
//! `scripts/rabbitmq-start`; `PARKWAY_RABBITMQ_URL` overrides the address).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests abort on setup failure

use std::time::Duration;

use bytes::Bytes;
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

/// A fresh queue (and the channel that declared it).
async fn declared(link: &Link) -> (String, lapin::Channel) {
    let queue = format!("pw-test-returns-{:016x}", fastrand::u64(..));
    let ch = link.channel().await.unwrap();
    let declare = QueueDeclareOptions {
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(queue.as_str().into(), declare, FieldTable::default())
        .await
        .unwrap();
    (queue, ch)
}

/// Publishes all `cases` at once, each `(routable, wait)` to the fresh
/// queue or to a queue that does not exist, waiting `wait` for its confirm;
/// returns every patient publish (10 s) whose outcome is not its own.
async fn swapped(cases: &[(bool, Duration)]) -> Vec<String> {
    let link = link().await;
    let (queue, ch) = declared(&link).await;
    let missing = format!("{queue}-missing");
    let results = join_all(cases.iter().map(|&(routable, wait)| {
        let key = if routable { &queue } else { &missing };
        confirmed(
            &link,
            "",
            key,
            Bytes::from_static(b"x"),
            BasicProperties::default(),
            wait,
        )
    }))
    .await;
    let _ = ch
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await;
    cases
        .iter()
        .zip(&results)
        .enumerate()
        .filter_map(
            |(i, (&(routable, wait), result))| match (routable, result) {
                _ if wait < PATIENT => None,
                (true, Ok(())) => None,
                (false, Err(e)) if e.kind() == ErrorKind::Refused => None,
                (_, r) => Some(format!("#{i} routable={routable}: {r:?}")),
            },
        )
        .collect()
}

const PATIENT: Duration = Duration::from_secs(10);

/// Routable and unroutable mandatory publishes in flight together: each
/// unroutable one, and only those, reads as refused. (lapin hands a return
/// to whichever confirm completes next on its channel; were returns credited
/// to another publish, a returned retry copy would read as accepted and its
/// original would be acked: a lost message.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_return_is_credited_to_its_own_publish_only() {
    let cases: Vec<_> = (0..600).map(|i| (i % 3 != 0, PATIENT)).collect();
    let wrong = swapped(&cases).await;
    assert!(
        wrong.is_empty(),
        "{} of {} publishes got another publish's outcome, e.g. {:?}",
        wrong.len(),
        cases.len(),
        &wrong[..wrong.len().min(3)]
    );
}

/// Callers that give up waiting (here: a 1 ns timeout on every fifth
/// publish) leave their publishes running: none of them can take another
/// publish's return with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_giving_up_do_not_swap_the_others_outcomes() {
    let cases: Vec<_> = (0..600)
        .map(|i| {
            let wait = if i % 5 == 0 {
                Duration::from_nanos(1)
            } else {
                PATIENT
            };
            (i % 3 != 0, wait)
        })
        .collect();
    let wrong = swapped(&cases).await;
    assert!(
        wrong.is_empty(),
        "{} wrong outcomes, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(3)]
    );
}
