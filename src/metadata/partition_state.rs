//! One partition's replicas and who leads them, as the controller decides (Kafka's
//! `PartitionRegistration`): the replicas (placed once, preferred leader first, each on
//! its own host), the current leader and its epoch, and the in-sync replicas. The
//! controller changes it only through its methods (fencing, unfencing, ISR changes,
//! preferred and drained leaders, replica moves), every one of them deterministic, so
//! every voter computes the same elections from the same log.
//!
//! Replicas move as in Kafka's reassignment (KIP-455): the new replicas join the
//! replica set and follow; once every one of them is in sync, the set becomes the
//! target, the replicas left out leave it and the ISR, and if the leader was one of
//! them an in-sync replica of the target leads with a bumped epoch.

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
    /// While replicas move: the replica set to end with (`replicas` holds it and the
    /// replicas still to leave).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Vec<NodeId>>,
    /// While replicas move: the ones the move added (Kafka's adding replicas), which a
    /// cancelled move takes away again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding: Vec<NodeId>,
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
            target: None,
            adding: Vec::new(),
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

    /// Unclean election, where the topic allows it: a partition without a leader (none
    /// of its in-sync replicas is live) is led by its first replica `live` allows, which
    /// becomes the whole ISR, with a bumped epoch; the others cut back to its log when
    /// they follow. True when it elected.
    pub fn elect_unclean(&mut self, live: impl Fn(NodeId) -> bool) -> bool {
        if self.leader.is_some() {
            return false;
        }
        match self.replicas.iter().copied().find(|n| live(*n)) {
            Some(n) => {
                self.leader = Some(n);
                self.isr = vec![n];
                self.leader_epoch += 1;
                true
            }
            None => false,
        }
    }

    /// Starts moving the replicas to `target` (no two on one host, checked by the
    /// caller): the ones not yet replicas join and follow; [`finish_move`] completes it.
    /// Refused (false) while another move is underway or when `target` is empty or the
    /// current set.
    ///
    /// [`finish_move`]: Self::finish_move
    pub fn start_move(&mut self, target: Vec<NodeId>) -> bool {
        if self.target.is_some() || target.is_empty() || target == self.replicas {
            return false;
        }
        for n in &target {
            if !self.replicas.contains(n) {
                self.replicas.push(*n);
                self.adding.push(*n);
            }
        }
        self.target = Some(target);
        true
    }

    /// Cancels the move underway (Kafka's cancelled reassignment): the replicas it
    /// added leave the replicas and the ISR, and if one of them led, the first in-sync
    /// replica left that `live` allows leads, with a bumped epoch. Refused (false) with
    /// no move underway, or when only added replicas are in sync.
    pub fn cancel_move(&mut self, live: impl Fn(NodeId) -> bool) -> bool {
        if self.target.is_none() || self.isr.iter().all(|n| self.adding.contains(n)) {
            return false;
        }
        let adding = std::mem::take(&mut self.adding);
        self.replicas.retain(|n| !adding.contains(n));
        self.isr.retain(|n| !adding.contains(n));
        self.target = None;
        if self.leader.is_some_and(|l| adding.contains(&l)) {
            self.leader = self.isr.iter().copied().find(|n| live(*n));
            self.leader_epoch += 1;
        }
        true
    }

    /// Completes a move once every replica of its target is in sync: the others leave
    /// the replicas and the ISR, and a leader that left hands over to the first in-sync
    /// replica of the target that `live` allows, else to the first that `unfenced`
    /// allows (availability first), with a bumped epoch. True when it did.
    pub fn finish_move(
        &mut self,
        live: impl Fn(NodeId) -> bool,
        unfenced: impl Fn(NodeId) -> bool,
    ) -> bool {
        let Some(target) = self
            .target
            .take_if(|t| t.iter().all(|n| self.isr.contains(n)))
        else {
            return false;
        };
        self.isr = target
            .iter()
            .copied()
            .filter(|n| self.isr.contains(n))
            .collect();
        if self.leader.is_some_and(|l| !target.contains(&l)) {
            let mut isr = self.isr.iter().copied();
            self.leader = isr
                .clone()
                .find(|n| live(*n))
                .or_else(|| isr.find(|n| unfenced(*n)));
            self.leader_epoch += 1;
        }
        self.replicas = target;
        self.adding.clear();
        true
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
    fn moved_replicas_leave_only_once_their_replacements_are_in_sync() {
        const D: NodeId = 4096;
        let mut p = PartitionState::new(vec![A, B, C]);
        assert!(!p.start_move(vec![A, B, C]), "nothing to move");
        assert!(p.start_move(vec![D, B, C]));
        assert!(!p.start_move(vec![A, B, D]), "one move at a time");
        assert_eq!(p.replicas, [A, B, C, D]);
        assert!(p.follows(D));
        assert!(!p.finish_move(|_| true, |_| true), "D is not in sync yet");
        p.alter_isr(0, vec![A, B, C, D]).expect("D caught up");
        assert!(p.finish_move(|n| n != B, |_| true));
        assert_eq!(p.replicas, [D, B, C]);
        assert_eq!(p.isr, [D, B, C]);
        assert_eq!(
            (p.leader, p.leader_epoch),
            (Some(D), 1),
            "A left; B not live"
        );
        assert_eq!(p.target, None);
        // A follower moves without a leader change.
        assert!(p.start_move(vec![D, B, A]));
        p.alter_isr(1, vec![D, B, C, A]).expect("A caught up");
        assert!(p.finish_move(|_| true, |_| true));
        assert_eq!((p.leader, p.leader_epoch), (Some(D), 1));
        assert_eq!(p.isr, [D, B, A]);
    }

    #[test]
    fn a_cancelled_move_takes_back_only_the_replicas_it_added() {
        const D: NodeId = 4096;
        let mut p = PartitionState::new(vec![A, B]);
        assert!(!p.cancel_move(|_| true), "nothing moves");
        assert!(p.start_move(vec![C, D]));
        assert_eq!(
            (p.replicas.clone(), p.adding.clone()),
            (vec![A, B, C, D], vec![C, D])
        );
        p.alter_isr(0, vec![A, B, C]).expect("C caught up");
        assert!(p.cancel_move(|_| true));
        assert_eq!(p.replicas, [A, B]);
        assert_eq!(p.isr, [A, B]);
        assert_eq!(
            (p.target.clone(), p.adding.len(), p.leader),
            (None, 0, Some(A))
        );
        // A finished move forgets what it added.
        assert!(p.start_move(vec![B, C]));
        p.alter_isr(0, vec![A, B, C]).expect("C caught up");
        assert!(p.finish_move(|_| true, |_| true));
        assert_eq!((p.replicas.clone(), p.adding.len()), (vec![B, C], 0));
        assert!(!p.cancel_move(|_| true));
    }

    #[test]
    fn an_unclean_election_takes_a_live_replica_out_of_sync() {
        let mut p = PartitionState::new(vec![A, B]);
        p.alter_isr(0, vec![A]).expect("B fell behind");
        assert!(p.fence_host(1, |_| true));
        assert!(!p.elect_unclean(|_| false), "nobody live");
        assert!(p.elect_unclean(|n| n == B));
        assert_eq!(
            (p.leader, p.isr.clone(), p.leader_epoch),
            (Some(B), vec![B], 2)
        );
        assert!(!p.elect_unclean(|_| true), "led already");
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
