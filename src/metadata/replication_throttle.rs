//! Kafka's replication throttle, as `kafka-reassign-partitions.sh --throttle` sets it:
//! each broker's `leader.replication.throttled.rate` (bytes a second it sends to
//! followers of throttled replicas), kept in the cluster metadata, and each topic's
//! `leader.replication.throttled.replicas` (which of its replicas are throttled where
//! they lead), a topic config. `follower.replication.throttled.*` are taken and kept for
//! the tools, which set and clear them in pairs; weir enforces the leader's side, which
//! is where the bytes of a move leave (each move's leader is throttled when the tool
//! names its replicas), so one rate bounds them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The broker config: bytes a second a leader sends to throttled followers.
pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
/// The broker config Kafka's followers throttle their fetches by (kept, not enforced).
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
/// The topic config naming throttled leader replicas.
pub const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
/// The topic config naming throttled follower replicas (kept, not enforced).
pub const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

/// The broker id Kafka's tools use for the default of every broker (the resource `""`).
pub const ALL_BROKERS: i32 = -1;

/// Each broker's throttle rates (bytes a second), by node id; [`ALL_BROKERS`] holds the
/// default a broker without its own takes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerThrottles(pub BTreeMap<i32, BTreeMap<String, u64>>);

impl BrokerThrottles {
    /// Sets (`Some`) or removes (`None`) the broker config `key` of `node`.
    pub fn set(&mut self, node: i32, key: &str, value: Option<u64>) {
        let configs = self.0.entry(node).or_default();
        match value {
            Some(v) => {
                configs.insert(key.to_string(), v);
            }
            None => {
                configs.remove(key);
            }
        }
        if configs.is_empty() {
            self.0.remove(&node);
        }
    }

    /// The configs `node` has set for itself.
    pub fn of(&self, node: i32) -> BTreeMap<String, u64> {
        self.0.get(&node).cloned().unwrap_or_default()
    }

    /// The rate `key` in force on `node`: its own, else every broker's default.
    pub fn rate(&self, node: i32, key: &str) -> Option<u64> {
        [node, ALL_BROKERS]
            .iter()
            .find_map(|n| self.0.get(n).and_then(|c| c.get(key)).copied())
    }
}

/// Checks a broker throttle config's key and value: a rate in bytes a second.
pub fn broker_value(key: &str, value: &str) -> Result<u64, String> {
    if key != LEADER_RATE && key != FOLLOWER_RATE {
        return Err(format!(
            "{key} cannot be changed while weir runs (its settings come from `weir serve`); \
             only {LEADER_RATE} and {FOLLOWER_RATE} can"
        ));
    }
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("{key}={value:?}: expected bytes a second, at least 1"))
}

/// Which replicas of a topic a `*.replication.throttled.replicas` value throttles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThrottledReplicas {
    /// `*`: every replica.
    All,
    /// `partition:broker` pairs (none for an empty value).
    Some(Vec<(i32, i32)>),
}

impl ThrottledReplicas {
    /// Parses Kafka's format: `*`, or comma-separated `partition:broker` (may be empty).
    pub fn parse(value: &str) -> Option<ThrottledReplicas> {
        let value = value.trim();
        if value == "*" {
            return Some(ThrottledReplicas::All);
        }
        value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|pair| {
                let (p, b) = pair.split_once(':')?;
                Some((p.trim().parse().ok()?, b.trim().parse().ok()?))
            })
            .collect::<Option<Vec<_>>>()
            .map(ThrottledReplicas::Some)
    }

    /// True when the replica of `partition` on `node` is throttled.
    pub fn contains(&self, partition: i32, node: i32) -> bool {
        match self {
            ThrottledReplicas::All => true,
            ThrottledReplicas::Some(pairs) => pairs.contains(&(partition, node)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brokers_own_rate_wins_over_the_default_and_removing_it_restores_that() {
        let mut t = BrokerThrottles::default();
        t.set(ALL_BROKERS, LEADER_RATE, Some(10));
        t.set(1024, LEADER_RATE, Some(50));
        assert_eq!(t.rate(1024, LEADER_RATE), Some(50));
        assert_eq!(t.rate(2048, LEADER_RATE), Some(10));
        t.set(1024, LEADER_RATE, None);
        assert_eq!(t.rate(1024, LEADER_RATE), Some(10));
        t.set(ALL_BROKERS, LEADER_RATE, None);
        assert_eq!(t, BrokerThrottles::default());
    }

    #[test]
    fn replica_lists_parse_as_kafka_writes_them() {
        let some = ThrottledReplicas::parse("0:1024, 1:2048").expect("valid");
        assert!(some.contains(0, 1024) && some.contains(1, 2048) && !some.contains(0, 2048));
        assert!(ThrottledReplicas::parse("*").expect("all").contains(7, 3));
        assert_eq!(
            ThrottledReplicas::parse(""),
            Some(ThrottledReplicas::Some(vec![]))
        );
        for bad in ["0", "a:1", "0:b"] {
            assert_eq!(ThrottledReplicas::parse(bad), None, "{bad}");
        }
        assert!(broker_value(LEADER_RATE, "50000000").is_ok());
        assert!(broker_value(LEADER_RATE, "0").is_err());
        assert!(broker_value("log.retention.ms", "1").is_err());
    }
}
