//! Cluster metadata: which topics exist (the persisted [`registry`]), which names are
//! legal ([`topic_name`]), what a topic's config overrides mean ([`topic_config`]), and
//! which shard owns a partition or a group ([`placement`]), and how the controller
//! elects leaders and moves replicas ([`cluster_state`], [`partition_state`]).

pub mod cluster_state;
pub mod controller_link;
mod elections;
pub mod metadata_change;
pub mod partition_error;
pub mod partition_state;
pub mod placement;
pub mod producer_ids;
pub mod registry;
pub mod registry_files;
pub mod replica_moves;
pub mod replication_throttle;
pub mod topic;
pub mod topic_config;
pub mod topic_name;
