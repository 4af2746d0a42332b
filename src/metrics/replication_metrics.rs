//! Replication health as operators alert on it, Kafka's broker metrics under weir's
//! names: per shard, the partitions it leads that are under-replicated, the ISR shrinks
//! and expands its leaders had committed, and each follower's lag; per host, whether its
//! controller leads the quorum, how often the quorum's leader changed and — on the
//! active controller, as Kafka's OfflinePartitionsCount — the partitions with no leader.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use super::ShardLabel;

/// A follower of a partition a shard leads.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FollowerLabels {
    /// The leader's shard.
    pub shard: u32,
    /// The topic.
    pub topic: String,
    /// The partition index.
    pub partition: u32,
    /// The follower's node id.
    pub follower: i32,
}

/// The replication families, registered once.
#[derive(Clone)]
pub(super) struct ReplicationFamilies {
    under_replicated: Family<ShardLabel, Gauge>,
    isr_shrinks: Family<ShardLabel, Counter>,
    isr_expands: Family<ShardLabel, Counter>,
    follower_lag: Family<FollowerLabels, Gauge>,
}

impl ReplicationFamilies {
    /// Creates the families and registers them in `registry`.
    pub(super) fn register(registry: &mut Registry) -> ReplicationFamilies {
        let r = ReplicationFamilies {
            under_replicated: Family::default(),
            isr_shrinks: Family::default(),
            isr_expands: Family::default(),
            follower_lag: Family::default(),
        };
        registry.register(
            "under_replicated_partitions",
            "Partitions the shard leads with fewer in-sync replicas than replicas (published every second)",
            r.under_replicated.clone(),
        );
        registry.register(
            "isr_shrinks",
            "ISR shrinks the controller committed for partitions the shard leads",
            r.isr_shrinks.clone(),
        );
        registry.register(
            "isr_expands",
            "ISR expansions the controller committed for partitions the shard leads",
            r.isr_expands.clone(),
        );
        registry.register(
            "partition_follower_lag",
            "Offsets a follower is behind the log end of a partition the shard leads (published every second)",
            r.follower_lag.clone(),
        );
        r
    }

    /// Shard `shard`'s handles.
    pub(super) fn for_shard(&self, shard: u32) -> ReplicationMetrics {
        let label = ShardLabel { shard };
        ReplicationMetrics {
            shard,
            under_replicated: self.under_replicated.get_or_create_owned(&label),
            isr_shrinks: self.isr_shrinks.get_or_create_owned(&label),
            isr_expands: self.isr_expands.get_or_create_owned(&label),
            follower_lag: self.follower_lag.clone(),
        }
    }
}

/// One shard's replication metrics.
pub struct ReplicationMetrics {
    shard: u32,
    /// Partitions it leads that are under-replicated.
    pub under_replicated: Gauge,
    /// ISR shrinks committed for partitions it leads.
    pub isr_shrinks: Counter,
    /// ISR expansions committed for partitions it leads.
    pub isr_expands: Counter,
    follower_lag: Family<FollowerLabels, Gauge>,
}

impl ReplicationMetrics {
    fn labels(&self, topic: &str, partition: u32, follower: i32) -> FollowerLabels {
        FollowerLabels {
            shard: self.shard,
            topic: topic.to_string(),
            partition,
            follower,
        }
    }

    /// Publishes how far `follower` is behind on a partition this shard leads.
    pub fn set_follower_lag(&self, topic: &str, partition: u32, follower: i32, lag: u64) {
        self.follower_lag
            .get_or_create(&self.labels(topic, partition, follower))
            .set(lag as i64);
    }

    /// Stops publishing `follower`'s lag (it left the replicas, or this shard no longer
    /// leads the partition).
    pub fn forget_follower(&self, topic: &str, partition: u32, follower: i32) {
        self.follower_lag
            .remove(&self.labels(topic, partition, follower));
    }
}

/// The controller quorum as this host sees it: `Send + Sync`, made before the shards
/// (the controller starts first) and kept up by the host's voter, if it is one.
#[derive(Clone, Default)]
pub struct ControllerMetrics {
    active: Gauge,
    leader_changes: Counter,
    offline: Gauge,
}

impl ControllerMetrics {
    /// Registers its series in `registry`.
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "controller_active",
            "1 while this host's controller leads the quorum (Kafka's ActiveControllerCount), else 0",
            self.active.clone(),
        );
        registry.register(
            "controller_leader_changes",
            "Leaders of the quorum this host's voter saw elected (its first included)",
            self.leader_changes.clone(),
        );
        registry.register(
            "offline_partitions",
            "Partitions with no leader, on the active controller (0 elsewhere; updated every second)",
            self.offline.clone(),
        );
    }

    /// Records how many partitions have no leader (`None`: this host's controller is
    /// not the active one, and reports none).
    pub fn set_offline(&self, partitions: Option<usize>) {
        self.offline.set(partitions.map_or(0, |n| n as i64));
    }

    /// Records the quorum's leader as the voter `me` sees it now (`None` during an
    /// election), `last` being the last leader it knew.
    pub fn observe_leader(&self, me: u64, last: Option<u64>, now: Option<u64>) {
        if now.is_some() && now != last {
            self.leader_changes.inc();
        }
        self.active.set(i64::from(now == Some(me)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_of_leader_is_counted_and_activity_follows_it() {
        let m = ControllerMetrics::default();
        m.observe_leader(1, None, Some(1));
        assert_eq!((m.active.get(), m.leader_changes.get()), (1, 1));
        m.observe_leader(1, Some(1), Some(1));
        assert_eq!((m.active.get(), m.leader_changes.get()), (1, 1));
        // An election: no leader for a while, then another.
        m.observe_leader(1, Some(1), None);
        assert_eq!((m.active.get(), m.leader_changes.get()), (0, 1));
        m.observe_leader(1, Some(1), Some(2));
        assert_eq!((m.active.get(), m.leader_changes.get()), (0, 2));
    }
}
