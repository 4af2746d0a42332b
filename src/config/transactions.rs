//! The transactions section: how long a transaction may be open, and how long
//! transactional ids and idempotent producers are remembered.

use std::time::Duration;

use super::{invalid, options::ServeOptions, BrokerConfig, ConfigError};

/// Sets the transaction limits the options name.
pub(super) fn apply(c: &mut BrokerConfig, o: &ServeOptions) {
    let t = &mut c.transactions;
    if let Some(d) = o.transaction_max_timeout {
        t.timeout_max = d.0;
    }
    if let Some(d) = o.transactional_id_expiration {
        t.id_expiration = d.0;
    }
    if let Some(d) = o.producer_id_expiration {
        t.producer_id_expiration = d.0;
    }
}

/// Checks each limit is at least a second and fits Kafka's 32-bit milliseconds.
pub(super) fn validate(c: &BrokerConfig) -> Result<(), ConfigError> {
    let t = &c.transactions;
    for (flag, d) in [
        ("--transaction-max-timeout", t.timeout_max),
        ("--transactional-id-expiration", t.id_expiration),
        ("--producer-id-expiration", t.producer_id_expiration),
    ] {
        if d < Duration::from_secs(1) || d.as_millis() > i32::MAX as u128 {
            return Err(invalid(
                flag,
                "must be within 1s..=24d (Kafka's 32-bit milliseconds)",
            ));
        }
    }
    Ok(())
}
