//! One partition's replicas and who leads them, as the controller decides (Kafka's
//! `PartitionRegistration`): the replicas (placed once, preferred leader first, each on
//! its own host), the current leader and its epoch, and the in-sync replicas. The
//! controller changes it only through [`PartitionState::fence_host`],
//! [`PartitionState::unfence_host`] and [`PartitionState::alter_isr`], every one of them
//! deterministic, so every voter computes the same elections from the same log.

use serde::{Deserialize, Serialize};

use super::placement::{host_of, NodeId};

/// One partition's replication state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// Every replica, preferred leader first; no two on one host.
    pub replicas: Vec<NodeId>,
    /// The replica serving produce and fetch; `None` while no in-sync replica is live.
    pub leader: Option<NodeId>,
    /// Bumped at every leader change; stamped into every batch the leader appends.
    pub leader_epoch: i32,
    /// The replicas holding everything the leader acknowledged (the leader included,
    /// or, with no leader, the last replicas that were in sync). Never empty.
    pub isr: Vec<NodeId>,
}

/// Why an ISR change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsrRefusal {
    /// The proposer's leader epoch is not the current one: it is no longer the leader.
    StaleEpoch,
    /// The proposed ISR lacks the leader or names a node that is not a replica.
    Invalid,
}

impl PartitionState {
    /// A new partition with these replicas: the first leads, all are in sync.
    pub fn new(replicas: Vec<NodeId>) -> PartitionState {
        PartitionState {
            leader: replicas.first().copied(),
            leader_epoch: 0,
            isr: replicas.clone(),
            replicas,
        }
    }

    /// The preferred leader (the first replica).
    pub fn preferred(&self) -> Option<NodeId> {
        self.replicas.first().copied()
    }

    /// True when `node` is a replica but not the leader.
    pub fn follows(&self, node: NodeId) -> bool {
        self.leader != Some(node) && self.replicas.contains(&node)
    }

    /// Host `host` missed its session timeout: its replicas leave the ISR (unless one is
    /// the last in-sync replica, which stays so a clean election stays possible), and if
    /// it led, the first in-sync replica on a live host leads with a bumped epoch, or
    /// nobody does. True when anything changed.
    pub fn fence_host(&mut self, host: u32, live: impl Fn(NodeId) -> bool) -> bool {
        let before = self.clone();
        let on_host = |n: &NodeId| host_of(*n) == host;
        if self.isr.iter().any(|n| !on_host(n)) {
            self.isr.retain(|n| !on_host(n));
        }
        if self.leader.is_some_and(|l| on_host(&l)) {
            let next = self
                .replicas
                .iter()
                .copied()
                .find(|n| !on_host(n) && self.isr.contains(n) && live(*n));
            self.leader = next;
            self.leader_epoch += 1;
        }
        *self != before
    }

    /// Host `host` is back: a partition without a leader is led again by its in-sync
    /// replica on that host (a bumped epoch). Replicas that left the ISR rejoin it only
    /// when their leader says they caught up ([`alter_isr`](Self::alter_isr)). True
    /// when anything changed.
    pub fn unfence_host(&mut self, host: u32) -> bool {
        if self.leader.is_some() {
            return false;
        }
        match self.isr.iter().copied().find(|n| host_of(*n) == host) {
            Some(node) => {
                self.leader = Some(node);
                self.leader_epoch += 1;
                true
            }
            None => false,
        }
    }

    /// The leader of epoch `leader_epoch` sets the ISR (Kafka's AlterPartition): refused
    /// when that epoch is not current, or the ISR lacks the leader or names a non-replica.
    pub fn alter_isr(&mut self, leader_epoch: i32, isr: Vec<NodeId>) -> Result<(), IsrRefusal> {
        if leader_epoch != self.leader_epoch {
            return Err(IsrRefusal::StaleEpoch);
        }
        let Some(leader) = self.leader else {
            return Err(IsrRefusal::StaleEpoch);
        };
        if !isr.contains(&leader) || isr.iter().any(|n| !self.replicas.contains(n)) {
            return Err(IsrRefusal::Invalid);
        }
        // Kept in replica order, so equal sets compare equal.
        self.isr = self
            .replicas
            .iter()
            .copied()
            .filter(|n| isr.contains(n))
            .collect();
        Ok(())
    }

    /// Host `host` is drained: if it leads, the first in-sync replica elsewhere that
    /// `eligible` allows leads with a bumped epoch (the drained replica stays in sync,
    /// following). True when leadership moved.
    pub fn lead_elsewhere(&mut self, host: u32, eligible: impl Fn(NodeId) -> bool) -> bool {
        if self.leader.is_none_or(|l| host_of(l) != host) {
            return false;
        }
        let next = self
            .replicas
            .iter()
            .copied()
            .find(|n| host_of(*n) != host && self.isr.contains(n) && eligible(*n));
        match next {
            Some(n) => {
                self.leader = Some(n);
                self.leader_epoch += 1;
                true
            }
            None => false,
        }
    }

    /// Leadership returns to the preferred replica when it is in sync and live and
    /// another replica leads (Kafka's preferred leader election). True when it moved.
    pub fn prefer(&mut self, live: impl Fn(NodeId) -> bool) -> bool {
        match self.preferred() {
            Some(p) if self.leader != Some(p) && self.isr.contains(&p) && live(p) => {
                self.leader = Some(p);
                self.leader_epoch += 1;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: NodeId = 1024;
    const B: NodeId = 2048;
    const C: NodeId = 3072;

    #[test]
    fn a_fenced_leader_hands_over_to_an_in_sync_replica() {
        let mut p = PartitionState::new(vec![A, B, C]);
        assert!(p.fence_host(1, |_| true));
        assert_eq!((p.leader, p.leader_epoch), (Some(B), 1));
        assert_eq!(p.isr, [B, C]);
        // Its return changes nothing by itself: it must catch up first.
        assert!(!p.unfence_host(1));
        assert!(p.follows(A));
        assert_eq!(p.alter_isr(0, vec![A, B, C]), Err(IsrRefusal::StaleEpoch));
        assert_eq!(p.alter_isr(1, vec![A, C]), Err(IsrRefusal::Invalid));
        p.alter_isr(1, vec![C, A, B]).expect("leader adds A back");
        assert_eq!(p.isr, [A, B, C]);
        assert!(p.prefer(|_| true));
        assert_eq!((p.leader, p.leader_epoch), (Some(A), 2));
        // Drained: B leads, A stays in sync; nothing moves while it is the only choice.
        assert!(p.lead_elsewhere(1, |n| n != C));
        assert_eq!((p.leader, p.leader_epoch, p.isr.len()), (Some(B), 3, 3));
        assert!(!p.lead_elsewhere(1, |_| true), "host 1 no longer leads");
        let mut alone = PartitionState::new(vec![A]);
        assert!(!alone.lead_elsewhere(1, |_| true));
    }

    #[test]
    fn the_last_in_sync_replica_keeps_the_partition_until_it_returns() {
        let mut p = PartitionState::new(vec![A, B]);
        p.alter_isr(0, vec![A]).expect("B fell behind");
        assert!(p.fence_host(1, |_| true));
        assert_eq!(
            (p.leader, p.isr.clone()),
            (None, vec![A]),
            "no unclean election"
        );
        assert!(!p.unfence_host(2), "B is not in sync");
        assert!(p.unfence_host(1));
        assert_eq!((p.leader, p.leader_epoch), (Some(A), 2));
    }

    #[test]
    fn an_election_skips_replicas_that_are_not_live() {
        let mut p = PartitionState::new(vec![A, B, C]);
        assert!(p.fence_host(1, |n| n != B));
        assert_eq!(p.leader, Some(C));
        let mut single = PartitionState::new(vec![A]);
        assert!(single.fence_host(1, |_| true));
        assert_eq!((single.leader, single.isr.clone()), (None, vec![A]));
        assert!(!single.fence_host(1, |_| true), "nothing more to change");
    }
}
