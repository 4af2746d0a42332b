//! Per-topic configuration, under Kafka's names: which keys weir takes, what values each
//! accepts, and what the stored overrides make of the broker's defaults. A topic stores
//! only its overrides; everything else is the broker's setting.

use std::{collections::BTreeMap, time::Duration};

use super::replication_throttle::{ThrottledReplicas, FOLLOWER_REPLICAS, LEADER_REPLICAS};
use crate::storage::{CleanupPolicy, LogConfig};

/// A topic's overrides: Kafka config name → value, as given.
pub type TopicConfigs = BTreeMap<String, String>;

/// The keys a topic may set, each with what it accepts.
pub const KEYS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete, compact or compact,delete"),
    ("retention.ms", "milliseconds, -1 for no limit"),
    ("retention.bytes", "bytes, -1 for no limit"),
    ("segment.bytes", "bytes, at least 1048576"),
    ("segment.ms", "milliseconds, at least 1"),
    ("max.message.bytes", "bytes, at least 1"),
    ("min.insync.replicas", "at least 1"),
    ("message.timestamp.type", "CreateTime or LogAppendTime"),
    ("delete.retention.ms", "milliseconds, at least 0"),
    ("min.compaction.lag.ms", "milliseconds, at least 0"),
    ("unclean.leader.election.enable", "true or false"),
    (
        LEADER_REPLICAS,
        "* or partition:broker pairs, comma-separated",
    ),
    (
        FOLLOWER_REPLICAS,
        "* or partition:broker pairs, comma-separated",
    ),
];

/// Why a topic config was refused: the key, and what it accepts. Kafka's
/// INVALID_CONFIG.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The key is not a topic config weir takes.
    #[error("unknown topic config {0:?}")]
    UnknownKey(String),
    /// The value is not one the key accepts.
    #[error("{key}={value:?}: expected {expected}")]
    BadValue {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What the key accepts.
        expected: &'static str,
    },
}

fn number(value: &str, min: i64) -> Option<i64> {
    value.trim().parse::<i64>().ok().filter(|n| *n >= min)
}

/// Checks one override.
pub fn validate(key: &str, value: &str) -> Result<(), ConfigError> {
    let expected = KEYS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, e)| *e)
        .ok_or_else(|| ConfigError::UnknownKey(key.to_string()))?;
    let ok = match key {
        "cleanup.policy" => cleanup_policy(value).is_some(),
        "message.timestamp.type" => value == "CreateTime" || value == "LogAppendTime",
        "unclean.leader.election.enable" => value == "true" || value == "false",
        LEADER_REPLICAS | FOLLOWER_REPLICAS => ThrottledReplicas::parse(value).is_some(),
        "retention.ms" | "retention.bytes" => number(value, -1).is_some(),
        "segment.bytes" => number(value, 1 << 20).is_some(),
        "segment.ms" | "max.message.bytes" | "min.insync.replicas" => number(value, 1).is_some(),
        _ => number(value, 0).is_some(),
    };
    if ok {
        Ok(())
    } else {
        Err(ConfigError::BadValue {
            key: key.to_string(),
            value: value.to_string(),
            expected,
        })
    }
}

/// Checks every override of a set.
pub fn validate_all(configs: &TopicConfigs) -> Result<(), ConfigError> {
    configs.iter().try_for_each(|(k, v)| validate(k, v))
}

/// Kafka's `cleanup.policy` values: a comma-separated list of `delete` and `compact`.
fn cleanup_policy(value: &str) -> Option<CleanupPolicy> {
    let (mut delete, mut compact) = (false, false);
    for part in value.split(',').map(str::trim) {
        match part {
            "delete" => delete = true,
            "compact" => compact = true,
            _ => return None,
        }
    }
    match (delete, compact) {
        (true, false) => Some(CleanupPolicy::Delete),
        (false, true) => Some(CleanupPolicy::Compact),
        (true, true) => Some(CleanupPolicy::CompactAndDelete),
        (false, false) => None,
    }
}

fn parsed(configs: &TopicConfigs, key: &str) -> Option<i64> {
    configs.get(key).and_then(|v| v.trim().parse().ok())
}

/// The broker's log settings with the topic's overrides applied.
pub fn log_config(base: &LogConfig, configs: &TopicConfigs) -> LogConfig {
    let mut c = base.clone();
    let ms = |n: i64| (n >= 0).then(|| Duration::from_millis(n as u64));
    if let Some(n) = parsed(configs, "retention.ms") {
        c.retention_age_max = ms(n);
    }
    if let Some(n) = parsed(configs, "retention.bytes") {
        c.retention_bytes_max = (n >= 0).then_some(n as u64);
    }
    if let Some(n) = parsed(configs, "segment.bytes") {
        c.segment_bytes = n as u64;
    }
    if let Some(n) = parsed(configs, "segment.ms") {
        c.segment_age_max = ms(n);
    }
    if let Some(policy) = configs
        .get("cleanup.policy")
        .and_then(|v| cleanup_policy(v))
    {
        c.cleanup = policy;
    }
    if let Some(n) = parsed(configs, "delete.retention.ms") {
        c.delete_retention = Duration::from_millis(n.max(0) as u64);
    }
    if let Some(n) = parsed(configs, "min.compaction.lag.ms") {
        c.min_compaction_lag = Duration::from_millis(n.max(0) as u64);
    }
    c
}

/// True when the topic is compacted, so every record it takes must have a key.
pub fn compacted(configs: &TopicConfigs) -> bool {
    configs
        .get("cleanup.policy")
        .and_then(|v| cleanup_policy(v))
        .is_some_and(CleanupPolicy::compacts)
}

/// True when the topic stamps batches with the broker's append time.
pub fn log_append_time(configs: &TopicConfigs) -> bool {
    configs.get("message.timestamp.type").map(String::as_str) == Some("LogAppendTime")
}

/// The largest record batch the topic accepts: its `max.message.bytes`, or the broker's.
pub fn message_max_bytes(broker_default: usize, configs: &TopicConfigs) -> usize {
    parsed(configs, "max.message.bytes").map_or(broker_default, |n| n as usize)
}

/// Whether a partition none of whose in-sync replicas is live may be led by another
/// live replica (`unclean.leader.election.enable`; off, as in Kafka): available again,
/// at the price of what only the lost in-sync replicas held.
pub fn unclean_leader_election(configs: &TopicConfigs) -> bool {
    configs
        .get("unclean.leader.election.enable")
        .map(String::as_str)
        == Some("true")
}

/// In-sync replicas an acks=all produce needs (`min.insync.replicas`): the topic's
/// setting, else 2 for three or more replicas (so one host may fail and acknowledged
/// writes still sit on two) and 1 below.
pub fn min_insync_replicas(configs: &TopicConfigs, replication_factor: usize) -> usize {
    let default = if replication_factor >= 3 { 2 } else { 1 };
    parsed(configs, "min.insync.replicas").map_or(default, |n| n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_keys_take_what_kafka_takes_and_nothing_else() {
        assert!(validate("retention.ms", "-1").is_ok());
        assert!(validate("retention.ms", "604800000").is_ok());
        assert!(validate("segment.bytes", "1048576").is_ok());
        assert!(validate("cleanup.policy", "delete").is_ok());
        assert_eq!(
            validate("retention.ms", "soon"),
            Err(ConfigError::BadValue {
                key: "retention.ms".into(),
                value: "soon".into(),
                expected: "milliseconds, -1 for no limit"
            })
        );
        assert!(validate("segment.bytes", "100").is_err());
        assert!(validate("cleanup.policy", "compact").is_ok());
        assert!(validate("cleanup.policy", "compact,delete").is_ok());
        assert!(validate("cleanup.policy", "delete, compact").is_ok());
        assert!(validate("cleanup.policy", "compacted").is_err());
        assert!(validate("cleanup.policy", "").is_err());
        assert!(validate("message.timestamp.type", "LogAppendTime").is_ok());
        assert!(validate("message.timestamp.type", "Now").is_err());
        assert!(validate("unclean.leader.election.enable", "true").is_ok());
        assert!(validate("unclean.leader.election.enable", "yes").is_err());
        assert_eq!(
            validate("retention.hours", "1"),
            Err(ConfigError::UnknownKey("retention.hours".into()))
        );
    }

    #[test]
    fn overrides_apply_over_the_broker_defaults() {
        let base = LogConfig::default();
        let mut configs = TopicConfigs::new();
        configs.insert("retention.ms".into(), "60000".into());
        configs.insert("retention.bytes".into(), "-1".into());
        configs.insert("segment.bytes".into(), "2097152".into());
        let c = log_config(&base, &configs);
        assert_eq!(c.retention_age_max, Some(Duration::from_secs(60)));
        assert_eq!(c.retention_bytes_max, None);
        assert_eq!(c.segment_bytes, 2 << 20);
        assert_eq!(c.segment_age_max, base.segment_age_max);
        assert_eq!(message_max_bytes(1000, &configs), 1000);
        configs.insert("max.message.bytes".into(), "5".into());
        assert_eq!(message_max_bytes(1000, &configs), 5);
    }
}
