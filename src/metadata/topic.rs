//! One topic as the metadata records it.

use serde::{Deserialize, Serialize};

use super::{partition_state::PartitionState, placement::NodeId, topic_config::TopicConfigs};

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    /// The topic's name.
    pub name: String,
    /// Kafka's topic id, assigned at creation and never reused.
    pub id: [u8; 16],
    /// Number of partitions.
    pub partitions: u32,
    /// The topic's config overrides (see `metadata::topic_config`); absent in registries
    /// written before topics had configs.
    #[serde(default)]
    pub configs: TopicConfigs,
    /// The preferred leader of every partition (its first replica), chosen at creation
    /// and kept (absent in registries written before placement was stored: filled in on
    /// load with the placement those versions computed, which put the data where it is).
    #[serde(default)]
    pub placement: Vec<NodeId>,
    /// Every partition's replicas, leader, leader epoch and ISR; absent in metadata
    /// written before replication, where each partition is its one placed replica
    /// ([`fill_states`](Self::fill_states)).
    #[serde(default)]
    pub states: Vec<PartitionState>,
}

impl TopicInfo {
    /// Gives every partition without a recorded state the single-replica state of its
    /// placement: what metadata written before replication meant.
    pub fn fill_states(&mut self) {
        let known = self.states.len();
        self.states.extend(
            self.placement
                .iter()
                .skip(known)
                .map(|n| PartitionState::new(vec![*n])),
        );
    }

    /// Partition `p`'s state.
    pub fn state(&self, p: u32) -> Option<&PartitionState> {
        self.states.get(p as usize)
    }

    /// Replicas per partition (of partition 0; every partition of a topic has as many).
    pub fn replication_factor(&self) -> usize {
        self.states.first().map_or(1, |s| s.replicas.len())
    }
}
