//! What a partition's leader knows about its followers (Kafka's replica state on the
//! leader): how far each has made the log durable, when it was last caught up, and
//! from that the commit cap (the least durable end over the ISR) and the ISR changes
//! to propose. Pure state: times are passed in.

use std::{collections::HashMap, time::Duration, time::Instant};

use crate::{metadata::placement::NodeId, storage::Offset};

/// A follower joins the ISR only if it fetched this recently (followers long-poll for
/// at most half a second): one that stopped fetching is not caught up, however little
/// was written since.
const FETCHED_WITHIN: Duration = Duration::from_secs(2);

/// One follower as its leader sees it.
#[derive(Debug, Clone, Copy)]
struct Follower {
    /// One past the last offset it made durable (its last fetch offset).
    end: Offset,
    /// The last time it had everything the leader had (Kafka's lastCaughtUpTime).
    caught_up_at: Instant,
    /// When it last fetched, and the leader's log end then.
    last_fetch: Option<(Instant, Offset)>,
}

/// A leader's view of its partition's replication, for one leader epoch.
#[derive(Debug)]
pub struct Progress {
    /// The epoch this leadership is for.
    pub epoch: i32,
    /// The leader's log end when it took this leadership (Kafka's leader epoch start
    /// offset): everything below may have been acknowledged by an earlier leader, while
    /// this one's high watermark can still be behind it.
    epoch_start: Offset,
    me: NodeId,
    isr: Vec<NodeId>,
    /// Replicas proposed for the ISR and not yet committed: counted for the commit cap
    /// already (Kafka's maximal ISR), so none joins missing a committed offset.
    joining: Vec<NodeId>,
    followers: HashMap<NodeId, Follower>,
}

/// An ISR change a leader should propose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    /// The ISR to propose.
    pub isr: Vec<NodeId>,
    /// The replicas it adds (they count for the commit cap until it is decided).
    pub joining: Vec<NodeId>,
}

impl Progress {
    /// Leadership of a partition with `replicas` and ISR `isr`, taken at `now` with the
    /// high watermark at `high_watermark` and the log ending at `log_end`: every
    /// follower is assumed durable up to the high watermark and caught up now (it gets a
    /// full lag period to prove otherwise).
    pub fn new(
        epoch: i32,
        me: NodeId,
        replicas: &[NodeId],
        isr: &[NodeId],
        (high_watermark, log_end): (Offset, Offset),
        now: Instant,
    ) -> Progress {
        let followers = replicas
            .iter()
            .filter(|n| **n != me)
            .map(|n| {
                (
                    *n,
                    Follower {
                        end: high_watermark,
                        caught_up_at: now,
                        last_fetch: None,
                    },
                )
            })
            .collect();
        Progress {
            epoch,
            epoch_start: log_end,
            me,
            isr: isr.to_vec(),
            joining: Vec::new(),
            followers,
        }
    }

    /// The ISR as the controller last committed it.
    pub fn isr(&self) -> &[NodeId] {
        &self.isr
    }

    /// The controller committed a new ISR for this epoch.
    pub fn set_isr(&mut self, isr: &[NodeId]) {
        self.isr = isr.to_vec();
        self.joining.retain(|n| !isr.contains(n));
    }

    /// The controller changed the replica set for this epoch (replicas moving): a new
    /// follower starts with nothing durable, caught up as of `now` (it gets a full lag
    /// period before it counts as lagging); a removed one is forgotten.
    pub fn set_replicas(&mut self, replicas: &[NodeId], now: Instant) {
        self.followers.retain(|n, _| replicas.contains(n));
        for n in replicas.iter().filter(|n| **n != self.me) {
            self.followers.entry(*n).or_insert(Follower {
                end: Offset(0),
                caught_up_at: now,
                last_fetch: None,
            });
        }
        self.joining.retain(|n| replicas.contains(n));
    }

    /// A proposal was refused or lost: the replicas it added no longer count.
    pub fn abandon_joining(&mut self) {
        self.joining.clear();
    }

    /// Follower `node` fetched at `offset` (everything below is durable there) when the
    /// leader's log ended at `log_end`. False for a node that is not a follower.
    pub fn fetched(&mut self, node: NodeId, offset: Offset, log_end: Offset, now: Instant) -> bool {
        let Some(f) = self.followers.get_mut(&node) else {
            return false;
        };
        f.end = offset;
        if offset >= log_end {
            f.caught_up_at = now;
        } else if let Some((at, end_then)) = f.last_fetch {
            // It has what the leader had at its previous fetch: caught up as of then.
            if offset >= end_then {
                f.caught_up_at = f.caught_up_at.max(at);
            }
        }
        f.last_fetch = Some((now, log_end));
        true
    }

    /// The most the high watermark may reach: the least durable end over the ISR's
    /// followers and those joining it (the leader's own durability is the log's part).
    /// `None` when the leader is alone in sync.
    pub fn commit_cap(&self) -> Option<Offset> {
        self.isr
            .iter()
            .chain(&self.joining)
            .filter(|n| **n != self.me)
            .filter_map(|n| self.followers.get(n))
            .map(|f| f.end)
            .min()
    }

    /// The ISR change due at `now`, if any: in-sync followers not caught up within
    /// `lag_max` leave; followers out of it that hold everything up to `high_watermark`
    /// and up to this leadership's start (a new leader's high watermark may be behind
    /// what its predecessor acknowledged: joining on it alone would count a replica
    /// holding less than that as in sync, and elect it), were caught up within `lag_max`
    /// and fetched lately join.
    pub fn isr_change(
        &self,
        high_watermark: Offset,
        lag_max: Duration,
        now: Instant,
    ) -> Option<IsrChange> {
        let lagging = |f: &Follower| now.saturating_duration_since(f.caught_up_at) > lag_max;
        let mut isr: Vec<NodeId> = self
            .isr
            .iter()
            .copied()
            .filter(|n| *n == self.me || self.followers.get(n).is_none_or(|f| !lagging(f)))
            .collect();
        let joining: Vec<NodeId> = self
            .followers
            .iter()
            .filter(|(n, f)| {
                !self.isr.contains(n)
                    && !self.joining.contains(n)
                    && f.end >= high_watermark.max(self.epoch_start)
                    && !lagging(f)
                    && f.last_fetch
                        .is_some_and(|(at, _)| now.saturating_duration_since(at) <= FETCHED_WITHIN)
            })
            .map(|(n, _)| *n)
            .collect();
        isr.extend(&joining);
        let mut sorted = isr.clone();
        sorted.sort_unstable();
        let mut current = self.isr.clone();
        current.sort_unstable();
        (sorted != current).then_some(IsrChange { isr, joining })
    }

    /// A proposal adding `joining` went out: they count for the commit cap from now.
    pub fn proposing(&mut self, joining: &[NodeId]) {
        self.joining.extend_from_slice(joining);
    }

    /// How far each follower is behind `log_end`, in offsets.
    pub fn lag(&self, log_end: Offset) -> impl Iterator<Item = (NodeId, u64)> + '_ {
        self.followers
            .iter()
            .map(move |(n, f)| (*n, log_end.0.saturating_sub(f.end.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: NodeId = 1024;
    const B: NodeId = 2048;
    const C: NodeId = 3072;
    const LAG: Duration = Duration::from_secs(10);

    #[test]
    fn a_replica_added_by_a_move_joins_only_once_it_holds_everything() {
        const D: NodeId = 4096;
        let t0 = Instant::now();
        let mut p = Progress::new(1, ME, &[ME, B], &[ME, B], (Offset(5), Offset(5)), t0);
        p.fetched(B, Offset(5), Offset(5), t0);
        p.set_replicas(&[ME, B, D], t0);
        assert_eq!(p.isr_change(Offset(5), LAG, t0), None, "D holds nothing");
        p.fetched(D, Offset(3), Offset(5), t0);
        assert_eq!(p.isr_change(Offset(5), LAG, t0), None);
        p.fetched(D, Offset(5), Offset(5), t0);
        let change = p.isr_change(Offset(5), LAG, t0).expect("D joins");
        assert_eq!(change.joining, [D]);
        p.set_replicas(&[ME, D], t0);
        assert!(!p.fetched(B, Offset(5), Offset(5), t0), "B left");
    }

    #[test]
    fn a_new_leader_with_a_stale_high_watermark_admits_only_replicas_past_its_start() {
        // It took over holding 9 offsets, all acknowledged by its predecessor, while
        // its own high watermark (learnt from that predecessor) was still 5.
        let t0 = Instant::now();
        let mut p = Progress::new(2, ME, &[ME, B, C], &[ME, B], (Offset(5), Offset(9)), t0);
        p.fetched(C, Offset(5), Offset(9), t0);
        assert_eq!(
            p.isr_change(Offset(5), LAG, t0),
            None,
            "C holds less than was acknowledged"
        );
        p.fetched(C, Offset(9), Offset(9), t0);
        let change = p.isr_change(Offset(5), LAG, t0).expect("C holds it all");
        assert_eq!(change.joining, [C]);
    }

    #[test]
    fn the_commit_cap_is_the_slowest_in_sync_follower() {
        let t0 = Instant::now();
        let mut p = Progress::new(1, ME, &[ME, B, C], &[ME, B, C], (Offset(5), Offset(5)), t0);
        assert_eq!(p.commit_cap(), Some(Offset(5)));
        p.fetched(B, Offset(9), Offset(9), t0);
        assert_eq!(p.commit_cap(), Some(Offset(5)), "C has not fetched");
        p.fetched(C, Offset(7), Offset(9), t0);
        assert_eq!(p.commit_cap(), Some(Offset(7)));
        p.set_isr(&[ME, B]);
        assert_eq!(p.commit_cap(), Some(Offset(9)), "C no longer counts");
        p.set_isr(&[ME]);
        assert_eq!(p.commit_cap(), None, "alone in sync");
        assert!(!p.fetched(4096, Offset(1), Offset(9), t0), "not a replica");
    }

    #[test]
    fn a_lagging_follower_leaves_and_rejoins_once_caught_up() {
        let t0 = Instant::now();
        let mut p = Progress::new(1, ME, &[ME, B, C], &[ME, B, C], (Offset(0), Offset(0)), t0);
        // B keeps up, C fetches but never reaches the log end.
        for i in 1..=12u64 {
            let now = t0 + Duration::from_secs(i);
            p.fetched(B, Offset(i * 10), Offset(i * 10), now);
            p.fetched(C, Offset(1), Offset(i * 10), now);
        }
        let now = t0 + Duration::from_secs(12);
        let change = p.isr_change(Offset(120), LAG, now).expect("C lags");
        assert_eq!(change.isr, [ME, B]);
        p.set_isr(&change.isr);
        assert_eq!(p.isr_change(Offset(120), LAG, now), None);
        // C catches up: it has everything the leader had at its previous fetch.
        p.fetched(C, Offset(120), Offset(130), now + Duration::from_secs(1));
        p.fetched(C, Offset(130), Offset(140), now + Duration::from_secs(2));
        let change = p
            .isr_change(Offset(125), LAG, now + Duration::from_secs(2))
            .expect("C is back");
        assert_eq!(
            (change.isr.clone(), change.joining.clone()),
            (vec![ME, B, C], vec![C])
        );
        p.proposing(&change.joining);
        assert_eq!(p.commit_cap(), Some(Offset(120)), "a joiner counts at once");
        assert_eq!(
            p.isr_change(Offset(125), LAG, now + Duration::from_secs(2)),
            None
        );
    }
}
