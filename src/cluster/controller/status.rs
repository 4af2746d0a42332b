//! `weir cluster status` as the controller leader answers it: the quorum, every host
//! with its last heartbeat, and the partitions that are not whole (no leader, a short
//! ISR, replicas moving, or a follower behind).

use super::Controller;
use crate::{
    cluster::rpc::{ClusterStatus, HostStatus, PartitionStatus},
    metadata::{cluster_state::MetadataError, placement::host_of},
};

impl Controller {
    /// The cluster's status; only the leader answers.
    pub(super) fn status(&self) -> Result<ClusterStatus, MetadataError> {
        self.leader_only()?;
        let applied = self.applied();
        let metrics = self.raft.metrics().borrow().clone();
        let voters: Vec<(u64, String)> = metrics
            .membership_config
            .membership()
            .nodes()
            .map(|(id, n)| (*id, n.addr.clone()))
            .collect();
        let heartbeats = self
            .heartbeats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let lags = self.lags.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let hosts = applied
            .state
            .hosts
            .iter()
            .map(|(id, record)| HostStatus {
                host: *id,
                record: record.clone(),
                heartbeat_age_ms: heartbeats.get(id).map(|t| t.elapsed().as_millis() as u64),
                partitions: applied
                    .state
                    .topics
                    .values()
                    .flat_map(|t| t.states.iter().flat_map(|s| s.replicas.iter()))
                    .filter(|n| host_of(**n) == *id)
                    .count(),
                voter: voters.iter().any(|(v, _)| *v == u64::from(*id)),
            })
            .collect();
        Ok(ClusterStatus {
            cluster_id: applied.state.cluster_id.clone(),
            voters,
            leader: self.id,
            term: metrics.current_term,
            version: applied.version(),
            hosts,
            topics: applied.state.topics.len(),
            degraded: applied
                .state
                .topics
                .values()
                .flat_map(|t| {
                    t.states.iter().enumerate().filter_map(|(p, s)| {
                        let lag = s.leader.map_or(0, |l| {
                            lags.get(&host_of(l))
                                .and_then(|v| {
                                    v.iter()
                                        .find(|x| x.topic == t.name && x.partition == p as u32)
                                })
                                .map_or(0, |x| x.lag)
                        });
                        let degraded = s.leader.is_none()
                            || s.isr.len() < s.replicas.len()
                            || s.target.is_some()
                            || lag > 0;
                        degraded.then(|| PartitionStatus {
                            topic: t.name.clone(),
                            partition: p as u32,
                            state: s.clone(),
                            lag,
                        })
                    })
                })
                .collect(),
        })
    }

    /// How many partitions have no leader, if this voter leads the quorum (Kafka's
    /// OfflinePartitionsCount, which only the active controller reports).
    pub fn offline_partitions(&self) -> Option<usize> {
        self.is_leader().then(|| {
            self.applied()
                .state
                .topics
                .values()
                .flat_map(|t| t.states.iter())
                .filter(|s| s.leader.is_none())
                .count()
        })
    }
}
