//! The SQS client, and SDK errors as transport errors.
//!
//! Region and credentials come from the standard AWS chain; the settings
//! may override the region and endpoint, or ask for an emulator's
//! placeholder keys. Nothing here logs a credential: the SDK's own errors are
//! reported through `DisplayErrorContext`, which names the failure, not the
//! signing keys.

use std::time::Duration;

use aws_config::{BehaviorVersion, Region, timeout::TimeoutConfig};
use aws_sdk_sqs::{
    Client,
    error::{DisplayErrorContext, SdkError},
};
use parkway_core::{ErrorKind, TransportError};

use crate::{
    KIND,
    config::{CredentialSource, SqsConfig},
};

/// Builds the client for `config`.
pub(crate) async fn build(config: &SqsConfig) -> Client {
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).timeout_config(
        TimeoutConfig::builder()
            .operation_timeout(config.call_timeout)
            .connect_timeout(Duration::from_secs(5))
            .build(),
    );
    if let Some(region) = &config.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(endpoint) = &config.endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    if config.credentials == CredentialSource::Emulator {
        // Not a secret: emulators accept any key, and AWS rejects this one.
        let placeholder = aws_sdk_sqs::config::Credentials::new(
            "parkway-emulator",
            "parkway-emulator",
            None,
            None,
            "parkway-emulator",
        );
        loader = loader.credentials_provider(placeholder);
    }
    Client::new(&loader.load().await)
}

/// Maps an SDK error: no answer is `Timeout`, no connection `Disconnected`,
/// an answer that says no `Refused`.
pub(crate) fn error<E, R>(doing: &str, e: SdkError<E, R>) -> TransportError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let kind = match &e {
        SdkError::TimeoutError(_) => ErrorKind::Timeout,
        SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => ErrorKind::Disconnected,
        SdkError::ConstructionFailure(_) => ErrorKind::Config,
        _ => ErrorKind::Refused,
    };
    let detail = format!("could not {doing}: {}", DisplayErrorContext(&e));
    TransportError::new(KIND, kind, detail)
}

/// A builder the SDK refused (a required field missing).
pub(crate) fn build_error(doing: &str, e: impl std::fmt::Display) -> TransportError {
    TransportError::new(KIND, ErrorKind::Config, format!("could not {doing}: {e}"))
}
