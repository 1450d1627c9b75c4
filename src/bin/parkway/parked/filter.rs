//! The filter flags shared by `list`, `show` and `redrive`.

use std::time::SystemTime;

use parkway::{FailureClass, Reason, redrive::Filter};

use crate::exit::CliError;

/// Which parked messages a command applies to; every flag given must hold.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct FilterArgs {
    /// Failure reason code (repeat for any of several), e.g.
    /// DOWNSTREAM_TIMEOUT.
    #[arg(long = "reason", value_name = "CODE")]
    reasons: Vec<String>,
    /// Failure class: transient, contention, permanent-technical,
    /// permanent-business, duplicate or unknown.
    #[arg(long, value_name = "CLASS")]
    class: Option<String>,
    /// Message type.
    #[arg(long = "type", value_name = "TYPE")]
    message_type: Option<String>,
    /// First failure at or after this time: RFC 3339
    /// (2026-07-01T09:00:00Z) or an age ago ("2h", "30m").
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// First failure before this time: RFC 3339 or an age ago.
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Correlation id.
    #[arg(long, value_name = "ID")]
    correlation_id: Option<String>,
    /// A header that must have this value (repeatable): `--header tenant=acme`.
    #[arg(long = "header", value_name = "NAME=VALUE")]
    headers: Vec<String>,
}

impl FilterArgs {
    /// The core filter; an error names the flag and the value.
    pub(crate) fn filter(&self, now: SystemTime) -> Result<Filter, CliError> {
        let mut f = Filter::default();
        for r in &self.reasons {
            let reason =
                Reason::parse(r).map_err(|e| CliError::usage(format!("--reason {r:?}: {e}")))?;
            f = f.reason(reason);
        }
        if let Some(c) = &self.class {
            let class: FailureClass = c
                .parse()
                .map_err(|e| CliError::usage(format!("--class {c:?}: {e}")))?;
            f = f.class(class);
        }
        if let Some(t) = &self.message_type {
            f = f.message_type(t);
        }
        f.first_failure_from = self
            .since
            .as_deref()
            .map(|s| time("--since", s, now))
            .transpose()?;
        f.first_failure_until = self
            .until
            .as_deref()
            .map(|s| time("--until", s, now))
            .transpose()?;
        if let Some(c) = &self.correlation_id {
            f = f.correlation_id(c);
        }
        for h in &self.headers {
            let Some((k, v)) = h.split_once('=').filter(|(k, _)| !k.is_empty()) else {
                return Err(CliError::usage(format!(
                    "--header {h:?}: expected NAME=VALUE"
                )));
            };
            f = f.header(k, v);
        }
        Ok(f)
    }
}

/// An RFC 3339 time, or an age (`2h`) before `now`.
fn time(flag: &str, text: &str, now: SystemTime) -> Result<SystemTime, CliError> {
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        return Ok(t);
    }
    match humantime::parse_duration(text) {
        Ok(age) => Ok(now.checked_sub(age).unwrap_or(SystemTime::UNIX_EPOCH)),
        Err(_) => Err(CliError::usage(format!(
            "{flag} {text:?}: expected an RFC 3339 time (2026-07-01T09:00:00Z) or an age such as 2h or 30m"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn ages_and_times_parse_and_bad_values_name_the_flag() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        assert_eq!(
            time("--since", "1h", now).ok(),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(6_400))
        );
        assert!(time("--since", "1970-01-01T00:00:05Z", now).is_ok());
        let e = time("--until", "yesterday", now)
            .err()
            .map(|e| e.to_string());
        assert!(e.unwrap_or_default().contains("--until"));
        let bad = FilterArgs {
            class: Some("fatal".into()),
            ..FilterArgs::default()
        };
        assert!(
            bad.filter(now)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
                .contains("--class")
        );
        let bad = FilterArgs {
            headers: vec!["novalue".into()],
            ..FilterArgs::default()
        };
        assert!(
            bad.filter(now)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
                .contains("--header")
        );
    }
}
