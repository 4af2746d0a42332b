//! The network section: where clients and metrics scrapers connect, what a request
//! may weigh and how long a silent connection is kept.

use std::time::Duration;

use super::{invalid, options::ServeOptions, BrokerConfig, ConfigError};

/// Sets the listeners and the request limits.
pub(super) fn apply(c: &mut BrokerConfig, o: &ServeOptions) {
    if let Some(listen) = o.listen {
        c.listen = listen;
    }
    if let Some(a) = &o.advertise {
        c.advertise.clone_from(a);
    }
    if let Some(m) = o.metrics_listen {
        c.metrics_listen = m.on();
    }
    if let Some(n) = o.max_request_bytes {
        c.max_request_bytes = n;
    }
    if let Some(n) = o.inflight_bytes {
        c.inflight_bytes_max = n;
    }
    if let Some(t) = o.idle_timeout {
        c.idle_timeout = t.0;
    }
}

/// Checks the listeners fit their shards and the limits their ranges.
pub(super) fn validate(c: &BrokerConfig) -> Result<(), ConfigError> {
    if u32::from(c.listen.port()) + c.shards as u32 - 1 > u32::from(u16::MAX) {
        return Err(invalid("--listen", "port + shards runs past 65535"));
    }
    if c.advertise.is_empty() {
        return Err(invalid("--advertise", "must not be empty"));
    }
    if c.inflight_bytes_max < 64 << 10 {
        return Err(invalid("--inflight-bytes", "must be at least 64 KiB"));
    }
    if c.idle_timeout < Duration::from_millis(100) {
        return Err(invalid("--idle-timeout", "must be at least 100ms"));
    }
    if c.max_request_bytes < 1024 {
        return Err(invalid("--max-request-bytes", "must be at least 1024"));
    }
    Ok(())
}
