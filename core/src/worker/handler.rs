//! The user's handler, and running it so that nothing it does can take the
//! worker down: a panic or an overrun becomes a classified [`Failure`].

use std::{future::Future, panic::AssertUnwindSafe, task::Poll, time::Duration};

use futures_util::FutureExt;

use crate::{
    failure::{Failure, Reason},
    transport::Message,
};

/// Processes one message. Return `Err(Failure)` with a stable reason code to
/// let the retry policy decide what happens next.
///
/// ```
/// use parkway_core::{Failure, Handler, Message};
/// struct Greeter;
/// impl Handler for Greeter {
///     async fn handle(&self, msg: &Message) -> Result<(), Failure> {
///         std::str::from_utf8(&msg.body).map_err(|e| Failure::permanent("NOT_UTF8").with_source(e))?;
///         Ok(())
///     }
/// }
/// let transport = std::sync::Arc::new(parkway_core::memory::MemoryTransport::new("greetings"));
/// let worker = parkway_core::Worker::builder(transport, Greeter).build();
/// assert!(worker.is_ok());
/// ```
pub trait Handler: Send + Sync + 'static {
    /// Handles one message.
    fn handle(&self, message: &Message) -> impl Future<Output = Result<(), Failure>> + Send;
}

/// Runs the handler once with a timeout, catching panics.
pub(crate) async fn run_once<H: Handler>(
    handler: &H,
    message: &Message,
    timeout: Duration,
) -> Result<(), Failure> {
    let mut run = std::pin::pin!(AssertUnwindSafe(handler.handle(message)).catch_unwind());
    // A handler that finishes on its first poll (most, under load) needs no
    // timer: arming one costs a clock read and a timer-wheel entry.
    let first = std::future::poll_fn(|cx| Poll::Ready(run.as_mut().poll(cx))).await;
    let outcome = match first {
        Poll::Ready(done) => Ok(done),
        Poll::Pending => tokio::time::timeout(timeout, run).await,
    };
    match outcome {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            Err(Failure::new(Reason::HANDLER_PANIC)
                .with_source(format!("handler panicked: {what}")))
        }
        Err(_) => Err(Failure::new(Reason::HANDLER_TIMEOUT).with_source(format!(
            "handler did not finish within {}",
            humantime::format_duration(timeout)
        ))),
    }
}
