//! Leader elections in the controller's state machine: after a host is fenced or comes
//! back, and unclean ones where a topic allows them. Each partition's part is in
//! [`PartitionState`]; this applies it over the cluster, deterministically.
//!
//! [`PartitionState`]: super::partition_state::PartitionState

use super::{
    cluster_state::{live_node, unfenced_host, ClusterState},
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

    /// Kafka's ElectLeaders for `partitions` (unknown ones skipped): each led by its
    /// preferred replica where that one is live, not draining and in sync, or, when
    /// `unclean`, each without a leader led by a live replica even out of sync (clean
    /// first: an in-sync replica that is live is taken before one out of sync).
    pub(super) fn elect_requested(&mut self, partitions: &[(String, u32)], unclean: bool) {
        let hosts = &self.hosts;
        for (topic, partition) in partitions {
            let Some(t) = self.topics.get_mut(topic) else {
                continue;
            };
            t.fill_states();
            let Some(state) = t.states.get_mut(*partition as usize) else {
                continue;
            };
            if unclean {
                let unfenced = |n: NodeId| unfenced_host(hosts, n).is_some();
                if state.leader.is_none() {
                    let isr = state.isr.clone();
                    if !state.elect_unclean(|n| isr.contains(&n) && unfenced(n)) {
                        state.elect_unclean(unfenced);
                    }
                }
            } else {
                state.prefer(|n| live_node(hosts, n));
            }
        }
    }
}
