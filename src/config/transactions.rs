//! The transactions section: how long a transaction may be open.

use std::time::Duration;

use super::{invalid, options::ServeOptions, BrokerConfig, ConfigError};

/// Sets the longest transaction timeout a producer may ask for.
pub(super) fn apply(c: &mut BrokerConfig, o: &ServeOptions) {
    if let Some(t) = o.transaction_max_timeout {
        c.transaction_timeout_max = t.0;
    }
}

/// Checks the timeout is at least a second and fits Kafka's 32-bit milliseconds.
pub(super) fn validate(c: &BrokerConfig) -> Result<(), ConfigError> {
    let t = c.transaction_timeout_max;
    if t < Duration::from_secs(1) || t.as_millis() > i32::MAX as u128 {
        return Err(invalid(
            "--transaction-max-timeout",
            "must be within 1s..=24d (Kafka's 32-bit milliseconds)",
        ));
    }
    Ok(())
}
