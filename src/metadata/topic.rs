//! One topic as the metadata records it.

use serde::{Deserialize, Serialize};

use super::{placement::NodeId, topic_config::TopicConfigs};

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
    /// The node of every partition, chosen at creation and kept (absent in registries
    /// written before placement was stored: filled in on load with the placement those
    /// versions computed, which put the data where it is).
    #[serde(default)]
    pub placement: Vec<NodeId>,
}
