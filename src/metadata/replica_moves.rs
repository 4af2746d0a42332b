//! Moving replicas: a host's elsewhere (`weir cluster drain --reassign`, which picks
//! the host that takes each replica) and the ones Kafka's AlterPartitionReassignments
//! names (`kafka-reassign-partitions.sh`). The moves themselves run in
//! [`PartitionState`]'s `start_move`/`finish_move`/`cancel_move`; this applies them,
//! deterministically, inside the controller's state machine.
//!
//! [`PartitionState`]: super::partition_state::PartitionState

use std::collections::BTreeMap;

use super::{
    cluster_state::{live_node, unfenced_host, ClusterState, HostRecord},
    metadata_change::ReplicaMove,
    placement::{host_of, node_id, shard_of, NodeId, ShardId},
};

/// Why a target replica set cannot be (Kafka's INVALID_REPLICA_ASSIGNMENT), or `Ok`:
/// it names at least one replica, each a shard of a registered host, no two on one
/// host.
pub fn check_target(hosts: &BTreeMap<u32, HostRecord>, target: &[NodeId]) -> Result<(), String> {
    if target.is_empty() {
        return Err("no replica given".into());
    }
    for (i, n) in target.iter().enumerate() {
        let known = hosts
            .get(&host_of(*n))
            .is_some_and(|h| (shard_of(*n).0 as u32) < h.shards);
        if !known {
            return Err(format!("node {n} is not a shard of a registered host"));
        }
        if target[..i].iter().any(|m| host_of(*m) == host_of(*n)) {
            return Err(format!(
                "two replicas on host {}: each replica needs a host of its own",
                host_of(*n)
            ));
        }
    }
    Ok(())
}

impl ClusterState {
    /// Starts moving every replica on host `host` to another live host that holds no
    /// replica of its partition — the one with the fewest replicas, the same shard
    /// index where it has one — keeping the replica's place in the preferred order.
    /// Partitions with no such host, or already moving, keep their replicas.
    pub(super) fn move_replicas_off(&mut self, host: u32) {
        let mut load: BTreeMap<u32, usize> = self
            .hosts
            .iter()
            .filter(|(id, h)| **id != host && !h.fenced && !h.draining && h.shards > 0)
            .map(|(id, _)| (*id, 0))
            .collect();
        for n in self
            .topics
            .values()
            .flat_map(|t| &t.states)
            .flat_map(|s| &s.replicas)
        {
            if let Some(count) = load.get_mut(&host_of(*n)) {
                *count += 1;
            }
        }
        for t in self.topics.values_mut() {
            for state in &mut t.states {
                let Some(at) = state.replicas.iter().position(|n| host_of(*n) == host) else {
                    continue;
                };
                if state.target.is_some() {
                    continue;
                }
                let Some((&to, _)) = load
                    .iter()
                    .filter(|(h, _)| !state.replicas.iter().any(|n| host_of(*n) == **h))
                    .min_by_key(|(h, count)| (**count, **h))
                else {
                    continue;
                };
                let shards = self.hosts.get(&to).map_or(1, |h| h.shards);
                let shard = (shard_of(state.replicas[at]).0 as u32).min(shards - 1);
                let mut target = state.replicas.clone();
                target[at] = node_id(to, ShardId(shard as usize));
                if state.start_move(target) {
                    *load.entry(to).or_default() += 1;
                }
            }
        }
    }

    /// Kafka's AlterPartitionReassignments: each move's partition starts moving to its
    /// target (a move underway is cancelled first, as a new reassignment replaces the
    /// old in Kafka), or its move underway is cancelled. Unknown partitions, invalid
    /// targets and a target equal to the replicas change nothing.
    pub(super) fn reassign(&mut self, moves: &[ReplicaMove]) {
        let hosts = &self.hosts;
        for m in moves {
            let Some(t) = self.topics.get_mut(&m.topic) else {
                continue;
            };
            t.fill_states();
            let Some(state) = t.states.get_mut(m.partition as usize) else {
                continue;
            };
            let live = |n: NodeId| live_node(hosts, n);
            let Some(target) = &m.target else {
                state.cancel_move(live);
                continue;
            };
            if check_target(hosts, target).is_err() || state.target.as_ref() == Some(target) {
                continue;
            }
            // A move underway is replaced: cancelled first, unless it cannot be.
            if state.target.is_some() && !state.cancel_move(live) {
                continue;
            }
            // Refused when the target is the replicas already: nothing to move.
            if state.start_move(target.clone()) {
                state.finish_move(live, |n| unfenced_host(hosts, n).is_some());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{cluster_state::Command, topic::TopicInfo, topic_config::TopicConfigs};

    const A: NodeId = 1024;
    const B: NodeId = 2048;
    const C: NodeId = 3072;

    /// Hosts 1-3 of one shard each and topic `t` of one partition on A.
    fn cluster() -> ClusterState {
        let mut s = ClusterState::default();
        for host in 1..=3 {
            let record = HostRecord::for_tests(1);
            s.apply(Command::RegisterHost { host, record })
                .expect("register");
        }
        let topic = TopicInfo {
            name: "t".into(),
            id: [1; 16],
            partitions: 1,
            configs: TopicConfigs::new(),
            placement: vec![A],
            states: Vec::new(),
        };
        s.apply(Command::CreateTopic(topic)).expect("create");
        s
    }

    fn moving(target: Option<Vec<NodeId>>) -> Command {
        Command::Reassign {
            moves: vec![ReplicaMove {
                topic: "t".into(),
                partition: 0,
                target,
            }],
        }
    }

    #[test]
    fn a_target_names_registered_shards_on_distinct_hosts() {
        let s = cluster();
        assert!(check_target(&s.hosts, &[B, A]).is_ok());
        assert!(check_target(&s.hosts, &[]).is_err());
        assert!(check_target(&s.hosts, &[A, 4096]).is_err(), "no host 4");
        assert!(
            check_target(&s.hosts, &[A + 1]).is_err(),
            "host 1 has one shard"
        );
        assert!(check_target(&s.hosts, &[A, A]).is_err());
    }

    #[test]
    fn a_move_replaced_then_cancelled_leaves_the_first_replicas() {
        let mut s = cluster();
        let state = |s: &ClusterState| s.topics["t"].states[0].clone();
        s.apply(moving(Some(vec![B]))).expect("reassign");
        assert_eq!(
            (state(&s).replicas, state(&s).target),
            (vec![A, B], Some(vec![B]))
        );
        // A new target replaces the move: B, which it added, leaves again.
        s.apply(moving(Some(vec![C]))).expect("reassign");
        assert_eq!(
            (state(&s).replicas, state(&s).adding),
            (vec![A, C], vec![C])
        );
        s.apply(moving(None)).expect("cancel");
        let p = state(&s);
        assert_eq!(
            (p.replicas, p.isr, p.target, p.leader),
            (vec![A], vec![A], None, Some(A))
        );
        // Invalid targets and unknown partitions change nothing.
        let before = s.clone();
        s.apply(moving(Some(vec![A, A]))).expect("ignored");
        s.apply(Command::Reassign {
            moves: vec![ReplicaMove {
                topic: "missing".into(),
                partition: 0,
                target: Some(vec![B]),
            }],
        })
        .expect("ignored");
        assert_eq!(s, before);
    }
}
