//! Consumer-group metrics, published by each group's coordinator shard every second:
//! members, generation and state.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};

/// A shard and a consumer group.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    /// The shard index (the group's coordinator).
    pub shard: u32,
    /// The group.
    pub group: String,
}

/// A shard, a consumer group and one of its states.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupStateLabels {
    /// The shard index (the group's coordinator).
    pub shard: u32,
    /// The group.
    pub group: String,
    /// Kafka's name for the state (`Stable`, `PreparingRebalance`, …).
    pub state: String,
}

/// Kafka's names for a group's states, as `weir_group_state` labels them.
const GROUP_STATES: &[&str] = &[
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
];

/// The group families, registered once.
#[derive(Clone)]
pub(super) struct GroupFamilies {
    members: Family<GroupLabels, Gauge>,
    generation: Family<GroupLabels, Gauge>,
    state: Family<GroupStateLabels, Gauge>,
}

impl GroupFamilies {
    /// Creates the families and registers them in `registry`.
    pub(super) fn register(registry: &mut Registry) -> GroupFamilies {
        let g = GroupFamilies {
            members: Family::default(),
            generation: Family::default(),
            state: Family::default(),
        };
        registry.register(
            "group_members",
            "Members of a consumer group, on its coordinator's shard (published every second)",
            g.members.clone(),
        );
        registry.register(
            "group_generation",
            "A consumer group's generation (published every second)",
            g.generation.clone(),
        );
        registry.register(
            "group_state",
            "1 for a consumer group's current state (published every second)",
            g.state.clone(),
        );
        g
    }

    /// Shard `shard`'s handles.
    pub(super) fn for_shard(&self, shard: u32) -> GroupMetrics {
        GroupMetrics {
            shard,
            families: self.clone(),
        }
    }
}

/// One shard's group metrics (groups are few and published once a second, so nothing
/// is cached).
pub struct GroupMetrics {
    shard: u32,
    families: GroupFamilies,
}

impl GroupMetrics {
    fn labels(&self, group: &str) -> GroupLabels {
        GroupLabels {
            shard: self.shard,
            group: group.to_string(),
        }
    }

    fn state_labels(&self, group: &str, state: &str) -> GroupStateLabels {
        GroupStateLabels {
            shard: self.shard,
            group: group.to_string(),
            state: state.to_string(),
        }
    }

    /// Publishes a group this shard coordinates: its state, generation and members.
    pub fn publish(&self, group: &str, state: &'static str, generation: i32, members: usize) {
        let (f, labels) = (&self.families, self.labels(group));
        f.members.get_or_create(&labels).set(members as i64);
        f.generation
            .get_or_create(&labels)
            .set(i64::from(generation));
        for s in GROUP_STATES {
            f.state
                .get_or_create(&self.state_labels(group, s))
                .set(i64::from(*s == state));
        }
    }

    /// Stops publishing a group this shard no longer coordinates (deleted).
    pub fn forget(&self, group: &str) {
        let (f, labels) = (&self.families, self.labels(group));
        f.members.remove(&labels);
        f.generation.remove(&labels);
        for s in GROUP_STATES {
            f.state.remove(&self.state_labels(group, s));
        }
    }
}
