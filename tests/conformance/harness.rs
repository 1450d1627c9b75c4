//! What a transport must provide to run the suite, and the plumbing that
//! runs a worker in the background while a scenario watches.

use std::{future::Future, sync::Arc, time::Duration};

use async_trait::async_trait;
use parkway::{
    Message, Parked, RetryPolicy, RunSummary, Transport, TransportError, Worker, WorkerError,
};
use tokio::{sync::oneshot, task::JoinHandle};

use super::script::{Record, Scripted};

/// A broker under test: makes fresh, randomly named queues.
#[async_trait]
pub trait Broker: Send + Sync {
    /// Short name for reports.
    fn name(&self) -> &'static str;
    /// A new queue (with its retry topology and parking lot) for `policy`.
    async fn queue(&self, policy: &RetryPolicy) -> Queue;
}

/// Publishes test messages to a queue's origin, and removes the queue's
/// broker resources at the end.
#[async_trait]
pub trait Publish: Send + Sync {
    async fn publish(&self, msg: Message) -> Result<(), TransportError>;
    async fn teardown(&self) {}
}

/// A queue under test.
pub struct Queue {
    pub transport: Arc<dyn Transport>,
    pub publisher: Arc<dyn Publish>,
}

impl Queue {
    pub async fn publish(&self, id: &str, body: &str) {
        self.publish_msg(Message::new("conformance", body.to_owned()).with_id(id))
            .await;
    }

    pub async fn publish_msg(&self, msg: Message) {
        self.publisher.publish(msg).await.expect("publish");
    }

    pub async fn parked(&self) -> Vec<Parked> {
        self.transport
            .parking_lot()
            .browse(100_000)
            .await
            .expect("browse")
    }

    pub async fn parked_ids(&self) -> Vec<String> {
        self.parked()
            .await
            .into_iter()
            .filter_map(|p| p.message.id)
            .collect()
    }
}

/// A worker running in the background.
pub struct Running {
    pub record: Record,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<RunSummary, WorkerError>>,
}

/// Sends logs to the test's captured output, which the runner prints only
/// when the test fails: Parkway's own at debug level (every failed attempt
/// with its decision and delay), everything else at warn. A broker test
/// that fails once in many runs then says why.
pub fn capture_logs() {
    use tracing_subscriber::{
        filter::{LevelFilter, Targets},
        layer::SubscriberExt as _,
        util::SubscriberInitExt as _,
    };
    let filter = Targets::new()
        .with_target("parkway", LevelFilter::DEBUG)
        .with_default(LevelFilter::WARN);
    // Set once per test binary; the later calls find it set.
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_ansi(false)
        .with_max_level(LevelFilter::DEBUG)
        .finish()
        .with(filter)
        .try_init();
}

/// Starts a worker with the scripted handler on `queue`.
pub fn start(queue: &Queue, policy: RetryPolicy) -> Running {
    capture_logs();
    let handler = Scripted::default();
    let record = handler.record.clone();
    let worker = Worker::builder(queue.transport.clone(), handler)
        .policy(policy)
        .concurrency(8)
        .handler_timeout(Duration::from_secs(10))
        .build()
        .expect("policy fits the transport");
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    Running {
        record,
        stop: Some(tx),
        task,
    }
}

impl Running {
    /// Asks the worker to stop and returns its summary.
    /// Whether the worker is still running (for diagnostics).
    #[allow(dead_code)]
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    pub async fn stop(mut self) -> RunSummary {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("worker stops within 30 s")
            .expect("worker task")
            .expect("worker ran without error")
    }
}

/// Stops the worker, removes the queue's resources, returns the summary.
pub async fn finish(w: Running, q: &Queue) -> RunSummary {
    let s = w.stop().await;
    q.publisher.teardown().await;
    s
}

/// Polls `check` until it holds, failing with `what` after `within`.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How long the broker may take to carry out anything; generous, because
/// this is a correctness suite, not a benchmark.
pub const WITHIN: Duration = Duration::from_secs(20);

/// Waits a little and checks that nothing more happens (no redelivery).
pub async fn settle_down() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}
