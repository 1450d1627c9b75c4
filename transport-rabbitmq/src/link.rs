//! One connection and its publish channel, numbered by generation.
//!
//! Why generations? After a reconnect the broker has already requeued every
//! delivery of the dead channel, and a new channel may reuse the old
//! channel's number: acknowledging an old delivery tag there would ack the
//! wrong message. Each delivery remembers the generation it came from, and
//! settling one from an earlier generation is refused without touching the
//! broker.

use lapin::{
    Channel, Connection, ConnectionProperties, options::ConfirmSelectOptions, types::ShortString,
};
use parkway_core::{ErrorKind, TransportError};

use crate::{KIND, RabbitConfig, confirms::Confirms};

/// A live connection with a confirm-mode publish channel.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) generation: u64,
    pub(crate) connection: Connection,
    pub(crate) publish: Confirms,
    pub(crate) frame_max: usize,
    /// The transport's armed faults (set by the transport after `open`).
    #[cfg(feature = "fault-injection")]
    pub(crate) faults: std::sync::Arc<crate::faults::Faults>,
}

impl Link {
    pub(crate) async fn open(
        config: &RabbitConfig,
        generation: u64,
    ) -> Result<Link, TransportError> {
        let props = ConnectionProperties::default()
            .with_connection_name(format!("parkway:{}", config.queue).into());
        let cannot = || format!("cannot connect to {}", config.redacted_url());
        let connect = Connection::connect(&config.url, props);
        let connection = tokio::time::timeout(config.confirm_timeout, connect)
            .await
            .map_err(|_| TransportError::new(KIND, ErrorKind::Timeout, cannot()))?
            .map_err(|e| {
                TransportError::new(KIND, ErrorKind::Disconnected, cannot()).with_source(e)
            })?;
        let publish = connection
            .create_channel()
            .await
            .map_err(|e| lapin_error("open the publish channel", e))?;
        publish
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| lapin_error("enable publisher confirms", e))?;
        let frame_max = usize::try_from(connection.configuration().frame_max()).unwrap_or(131_072);
        tracing::info!(url = %config.redacted_url(), generation, "connected to RabbitMQ");
        Ok(Link {
            generation,
            connection,
            publish: Confirms::new(publish),
            frame_max: if frame_max == 0 { 131_072 } else { frame_max },
            #[cfg(feature = "fault-injection")]
            faults: std::sync::Arc::default(),
        })
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.connection.status().connected() && self.publish.channel().status().connected()
    }

    /// A fresh channel for one-off work (declares, browsing, sweeps).
    pub(crate) async fn channel(&self) -> Result<Channel, TransportError> {
        self.connection
            .create_channel()
            .await
            .map_err(|e| lapin_error("open a channel", e))
    }
}

/// Closes a channel without waiting forever on a dead connection (closing
/// requeues its unacknowledged deliveries broker-side either way).
pub(crate) async fn close_quietly(ch: &Channel, why: &str) {
    let close = ch.close(200, ShortString::try_new(why).unwrap_or_default());
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), close).await;
}

/// Maps a lapin error to a transport error saying what we were doing.
pub(crate) fn lapin_error(doing: &str, e: lapin::Error) -> TransportError {
    let text = e.to_string();
    let kind = if text.contains("NOT_FOUND") || text.contains("PRECONDITION_FAILED") {
        ErrorKind::Topology
    } else if text.contains("ACCESS_REFUSED") {
        ErrorKind::Config
    } else {
        ErrorKind::Disconnected
    };
    TransportError::new(KIND, kind, format!("could not {doing}")).with_source(e)
}

/// A name as an AMQP short string (names are validated to ≤ 255 bytes; this
/// never panics on one that is not).
pub(crate) fn short(name: &str) -> Result<ShortString, TransportError> {
    ShortString::try_new(name).map_err(|e| {
        TransportError::new(
            KIND,
            ErrorKind::Config,
            format!("name too long for AMQP: {e}"),
        )
    })
}
