//! Moving a host's replicas elsewhere (`weir cluster drain --reassign`): which host
//! takes each replica. The moves themselves run in [`PartitionState`]'s
//! `start_move`/`finish_move`; this picks their targets, deterministically, inside the
//! controller's state machine.
//!
//! [`PartitionState`]: super::partition_state::PartitionState

use std::collections::BTreeMap;

use super::{
    cluster_state::ClusterState,
    placement::{host_of, node_id, shard_of, ShardId},
};

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
}
