//! The storage section: the data directory, the group commit, segments, retention,
//! compaction and recycling, and the defaults of topics made on first use.

use std::time::Duration;

use super::{invalid, options::ServeOptions, BrokerConfig, ConfigError};

/// Sets the storage settings.
pub(super) fn apply(c: &mut BrokerConfig, o: &ServeOptions) -> Result<(), ConfigError> {
    if let Some(d) = &o.data_dir {
        c.data_dir.clone_from(d);
    }
    if let Some(i) = o.flush_interval {
        c.flush_interval = i.0;
        // A fixed interval asked for without a target means a fixed interval.
        if o.flush_target_p99.is_none() {
            c.flush_target_p99 = None;
        }
    }
    if let Some(t) = o.flush_target_p99 {
        c.flush_target_p99 = t.on().map(|s| s.0);
    }
    if let Some(m) = o.flush_mode {
        c.flush_mode = m;
    }
    if let Some(n) = o.flush_bytes {
        c.flush_bytes_max = n;
    }
    if let Some(n) = o.message_max_bytes {
        c.message_max_bytes = n;
    }
    if let Some(n) = o.cache_bytes {
        c.cache_bytes_max = n;
    }
    if let Some(n) = o.segment_bytes {
        c.log.segment_bytes = n;
    }
    if let Some(r) = o.retention {
        if r.0.is_zero() {
            return Err(invalid("--retention", "must be more than 0"));
        }
        c.log.retention_age_max = Some(r.0);
    }
    if let Some(n) = o.retention_bytes {
        if n == 0 {
            return Err(invalid("--retention-bytes", "must be more than 0"));
        }
        c.log.retention_bytes_max = Some(n);
    }
    c.compaction_rate = o.compaction_rate.unwrap_or(c.compaction_rate);
    c.recycle.bytes_max = o.recycle_bytes.unwrap_or(c.recycle.bytes_max);
    c.recycle.delete_rate = o.delete_rate.unwrap_or(c.recycle.delete_rate);
    if let Some(b) = o.auto_create_topics {
        c.auto_create_topics = b;
    }
    if let Some(n) = o.default_partitions {
        c.default_partitions = n;
    }
    Ok(())
}

/// Checks the group commit, batch and segment settings against their ranges.
pub(super) fn validate(c: &BrokerConfig) -> Result<(), ConfigError> {
    if let Some(t) = c.flush_target_p99 {
        if t < Duration::from_micros(100) || t > Duration::from_secs(10) {
            return Err(invalid("--flush-target-p99", "must be within 100us..=10s"));
        }
    }
    if c.flush_interval > Duration::from_secs(10) {
        return Err(invalid("--flush-interval", "at most 10s"));
    }
    if c.flush_bytes_max < 4096 {
        return Err(invalid("--flush-bytes", "must be at least 4096"));
    }
    if c.default_partitions == 0 || c.default_partitions > 10_000 {
        return Err(invalid("--default-partitions", "must be within 1..=10000"));
    }
    if c.message_max_bytes < 1024
        || c.message_max_bytes > crate::storage::config::STORED_BATCH_BYTES_MAX
    {
        return Err(invalid(
            "--message-max-bytes",
            "must be within 1 KiB..=128 MiB",
        ));
    }
    c.log
        .validate()
        .map_err(|e| invalid("--segment-bytes", e.to_string()))
}
