//! Cluster metadata: which topics exist (the persisted [`registry`]), which names are
//! legal ([`topic_name`]), and which shard owns a partition or a group
//! ([`placement`]).

pub mod placement;
pub mod producer_ids;
pub mod registry;
pub mod topic_name;
