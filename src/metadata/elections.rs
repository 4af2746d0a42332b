//! Leader elections in the controller's state machine: after a host is fenced or comes
//! back, and unclean ones where a topic allows them. Each partition's part is in
//! [`PartitionState`]; this applies it over the cluster, deterministically.
//!
//! [`PartitionState`]: super::partition_state::PartitionState

use super::{
    cluster_state::{unfenced_host, ClusterState},
    placement::{host_of, NodeId},
    topic_config,
};

impl ClusterState {
    /// Elections after host `host` was fenced (its partitions move to in-sync replicas
    /// elsewhere) or came back (partitions left without a leader get it back).
    pub(super) fn elect_leaders(&mut self, host: u32, fenced: bool) {
        let hosts = &self.hosts;
        // A draining host may still take over: availability before maintenance.
        let live = |n: NodeId| host_of(n) != host && unfenced_host(hosts, n).is_some();
        for t in self.topics.values_mut() {
            t.fill_states();
            for state in &mut t.states {
                if fenced {
                    state.fence_host(host, live);
                } else {
                    state.unfence_host(host);
                }
            }
        }
    }

    /// Leaderless partitions of topics that allow unclean election are led by a live
    /// replica out of sync (see
    /// [`elect_unclean`](super::partition_state::PartitionState::elect_unclean)).
    pub(super) fn elect_unclean(&mut self) {
        let hosts = &self.hosts;
        let live = |n: NodeId| unfenced_host(hosts, n).is_some();
        for t in self.topics.values_mut() {
            if topic_config::unclean_leader_election(&t.configs) {
                for state in &mut t.states {
                    state.elect_unclean(live);
                }
            }
        }
    }
}
