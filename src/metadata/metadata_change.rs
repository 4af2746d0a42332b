//! The changes a host asks the controller for (Kafka's requests that reach the
//! controller, forwarded by the host that received them): the controller leader checks
//! each against the metadata and commits it as a [`Command`](super::cluster_state::Command).

use serde::{Deserialize, Serialize};

use super::{placement::NodeId, topic_config::TopicConfigs};
use crate::security::state::SecurityChange;

/// A change a host asks the controller for. The controller leader checks it against the
/// metadata, places what it creates and commits it as a [`Command`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetadataChange {
    /// CreateTopics.
    CreateTopic {
        /// The name.
        name: String,
        /// How many partitions.
        partitions: u32,
        /// Replicas per partition (absent from hosts that predate replication: 1).
        #[serde(default = "one")]
        replication_factor: usize,
        /// Checked config overrides.
        configs: TopicConfigs,
    },
    /// DeleteTopics.
    DeleteTopic(String),
    /// CreatePartitions.
    AddPartitions {
        /// The topic.
        name: String,
        /// Its partition count after.
        partitions: u32,
    },
    /// AlterConfigs / IncrementalAlterConfigs, already merged and checked against
    /// `expected`, the overrides the host merged into.
    SetConfigs {
        /// The topic.
        name: String,
        /// The overrides the change was computed from.
        expected: TopicConfigs,
        /// Its new overrides.
        configs: TopicConfigs,
    },
    /// Fill the group coordinator table if it is empty.
    EnsureCoordinators,
    /// A partition leader's ISR change (Kafka's AlterPartition).
    AlterIsr {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The proposer's leader epoch.
        leader_epoch: i32,
        /// The new ISR.
        isr: Vec<NodeId>,
    },
    /// Move every partition's leadership back to its preferred replica where that
    /// replica is live and in sync.
    PreferLeaders,
    /// `weir cluster drain`: a host's leadership moves to in-sync replicas elsewhere
    /// and stays away until the drain is undone.
    Drain {
        /// The host.
        host: u32,
        /// Start (`true`) or end the drain.
        draining: bool,
        /// Also move its replicas to other live hosts (`--reassign`).
        #[serde(default)]
        reassign: bool,
    },
    /// A change to the users' credentials.
    Security(SecurityChange),
    /// Kafka's AlterPartitionReassignments: each partition's replicas start moving to
    /// the target given (replacing a move underway), or, with none, the move underway
    /// is cancelled.
    Reassign {
        /// Topic, partition and target replicas of each.
        moves: Vec<ReplicaMove>,
    },
    /// IncrementalAlterConfigs of a broker's replication throttle rates (Kafka's
    /// dynamic broker configs; [`super::replication_throttle`]).
    SetBrokerThrottles {
        /// The broker's node id, or every broker's default.
        node: i32,
        /// Config name and rate in bytes a second (`None` removes it).
        set: Vec<(String, Option<u64>)>,
    },
    /// Kafka's ElectLeaders: each partition led by its preferred replica where that
    /// one is live and in sync, or (`unclean`) a partition without a leader led by a
    /// live replica even out of sync.
    ElectLeaders {
        /// Topic and partition of each.
        partitions: Vec<(String, u32)>,
        /// An unclean election rather than the preferred replica's.
        unclean: bool,
    },
}

fn one() -> usize {
    1
}

/// One partition's reassignment as asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaMove {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// The replicas to end with, preferred leader first; `None` cancels the move
    /// underway.
    pub target: Option<Vec<NodeId>>,
}
