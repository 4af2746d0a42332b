//! The replica lag a host's leaders see, shared between its shards (which report it
//! with their metrics, once a second) and its agent (which sends it to the controller
//! with each heartbeat, for `weir cluster status`).

use std::{collections::BTreeMap, sync::Mutex};

use serde::{Deserialize, Serialize};

/// How far behind its leader's log end a partition's slowest follower is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLag {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// Offsets the slowest follower lacks.
    pub lag: u64,
}

/// The lagging partitions a host leads. `Send + Sync`: one per host.
#[derive(Debug, Default)]
pub struct ReplicaLags(Mutex<BTreeMap<String, BTreeMap<u32, u64>>>);

impl ReplicaLags {
    /// Records the lag of partition `partition` of `topic`, which this host leads;
    /// 0 (or no longer leading it) forgets it.
    pub fn report(&self, topic: &str, partition: u32, lag: u64) {
        let mut lags = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match lags.get_mut(topic) {
            Some(parts) if lag == 0 => {
                parts.remove(&partition);
                if parts.is_empty() {
                    lags.remove(topic);
                }
            }
            Some(parts) => {
                parts.insert(partition, lag);
            }
            None if lag == 0 => {}
            None => {
                lags.insert(topic.to_string(), BTreeMap::from([(partition, lag)]));
            }
        }
    }

    /// Every lagging partition.
    pub fn snapshot(&self) -> Vec<PartitionLag> {
        let lags = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lags.iter()
            .flat_map(|(topic, parts)| {
                parts.iter().map(|(p, lag)| PartitionLag {
                    topic: topic.clone(),
                    partition: *p,
                    lag: *lag,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_up_partition_is_forgotten() {
        let lags = ReplicaLags::default();
        lags.report("t", 0, 5);
        lags.report("t", 1, 0);
        lags.report("u", 2, 7);
        assert_eq!(lags.snapshot().len(), 2);
        lags.report("t", 0, 0);
        assert_eq!(
            lags.snapshot(),
            [PartitionLag {
                topic: "u".into(),
                partition: 2,
                lag: 7
            }]
        );
    }
}
