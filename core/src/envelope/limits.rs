//! How big an envelope may get.
//!
//! Brokers reject messages whose headers are too large (RabbitMQ's
//! `frame_max`, SQS's 10 attributes / 256 KiB, Kafka's `message.max.bytes`),
//! and the worst time to find out is while parking a poison message. The
//! codec therefore has a byte budget it never exceeds.

/// The smallest allowed budget: enough for every field the rules need.
pub const MIN_ENVELOPE_BYTES: usize = 512;

/// Byte limits for the encoded envelope.
///
/// ```
/// use parkway_core::EnvelopeLimits;
/// let limits = EnvelopeLimits::new(2048, 512).unwrap();
/// assert_eq!(limits.max_bytes(), 2048);
/// assert!(EnvelopeLimits::new(100, 50).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeLimits {
    max_bytes: usize,
    max_error_bytes: usize,
}

/// Limits that cannot hold the required fields.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidLimits {
    /// The whole budget is below [`MIN_ENVELOPE_BYTES`].
    #[error("envelope max_bytes is {0}; it must be at least {MIN_ENVELOPE_BYTES}")]
    BudgetTooSmall(usize),
    /// The error budget is larger than the whole budget.
    #[error("envelope max_error_bytes ({error}) must not exceed max_bytes ({max})")]
    ErrorLargerThanBudget {
        /// The requested error budget.
        error: usize,
        /// The requested whole budget.
        max: usize,
    },
}

impl Default for EnvelopeLimits {
    /// 4 KiB in all, 1 KiB of it for the last error.
    fn default() -> Self {
        EnvelopeLimits {
            max_bytes: 4096,
            max_error_bytes: 1024,
        }
    }
}

impl EnvelopeLimits {
    /// Validates a budget: `max_bytes` for all Parkway headers together,
    /// `max_error_bytes` for the last-error text.
    pub fn new(max_bytes: usize, max_error_bytes: usize) -> Result<Self, InvalidLimits> {
        if max_bytes < MIN_ENVELOPE_BYTES {
            return Err(InvalidLimits::BudgetTooSmall(max_bytes));
        }
        if max_error_bytes > max_bytes {
            return Err(InvalidLimits::ErrorLargerThanBudget {
                error: max_error_bytes,
                max: max_bytes,
            });
        }
        Ok(EnvelopeLimits {
            max_bytes,
            max_error_bytes,
        })
    }

    /// Budget for all Parkway headers together (names and values).
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Budget for the last-error text.
    pub fn max_error_bytes(&self) -> usize {
        self.max_error_bytes
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
