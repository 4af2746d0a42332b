//! `weir cluster status` as the controller leader answers it: the quorum, every host
//! with its last heartbeat, and the partitions that are not whole (no leader, a short
//! ISR, replicas moving, or a follower behind).

use std::{collections::HashMap, time::Instant};

use openraft::{BasicNode, RaftMetrics};

use super::Controller;
use crate::{
    cluster::rpc::{ClusterStatus, HostStatus, PartitionStatus},
    metadata::{
        cluster_state::MetadataError,
        controller_link::{unix_ms, QuorumMember, QuorumStatus},
        placement::host_of,
    },
};

impl Controller {
    /// The cluster's status; only the leader answers.
    pub(super) fn status(&self) -> Result<ClusterStatus, MetadataError> {
        self.leader_only()?;
        let applied = self.applied();
        let metrics = self.raft.metrics().borrow().clone();
        let voters = self.voters();
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
        let quorum = self.replication_status(&metrics, &voters, &heartbeats, applied.version());
        Ok(ClusterStatus {
            quorum,
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

    /// The quorum's replication: each voter's end as the leader replicated to it (its
    /// own: its log's end), each other host's as its last heartbeat said; a member is
    /// caught up when it holds everything the leader has.
    fn replication_status(
        &self,
        metrics: &RaftMetrics<u64, BasicNode>,
        voters: &[(u64, String)],
        heartbeats: &HashMap<u32, Instant>,
        version: u64,
    ) -> QuorumStatus {
        let now = Instant::now();
        let now_ms = unix_ms();
        let heard_ms = |host: u64| {
            let heard = u32::try_from(host).ok().and_then(|h| heartbeats.get(&h));
            heard.map(|t| now_ms - now.saturating_duration_since(*t).as_millis() as i64)
        };
        let leader_end = metrics.last_log_index.map_or(0, |i| i + 1);
        let member = |host: u64, log_end: Option<u64>, address: Option<String>| QuorumMember {
            host,
            log_end,
            last_heard_ms: if host == self.id {
                Some(now_ms)
            } else {
                heard_ms(host)
            },
            caught_up_ms: (log_end == Some(leader_end)).then_some(now_ms),
            address,
        };
        let matched = |id: u64| {
            if id == self.id {
                return Some(leader_end);
            }
            let replication = metrics.replication.as_ref()?;
            replication
                .get(&id)
                .map(|m| m.map_or(0, |log_id| log_id.index + 1))
        };
        let known = self
            .known_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        QuorumStatus {
            leader: self.id,
            term: metrics.current_term,
            high_watermark: version + 1,
            voters: voters
                .iter()
                .map(|(id, addr)| member(*id, matched(*id), Some(addr.clone())))
                .collect(),
            observers: self
                .applied()
                .state
                .hosts
                .keys()
                .map(|h| u64::from(*h))
                .filter(|h| !voters.iter().any(|(v, _)| v == h))
                .map(|h| {
                    let end = u32::try_from(h)
                        .ok()
                        .and_then(|h| known.get(&h))
                        .map(|v| v + 1);
                    member(h, end, None)
                })
                .collect(),
        }
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
