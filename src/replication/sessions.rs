//! Which partitions a follower shard fetches from which leader node: one
//! [`FetchSession`] per leader node, shared between the shard's roles (which add and
//! remove partitions as the metadata changes) and the fetcher task that serves it (which
//! fetches all of them in one request). Kafka's fetcher-per-source-broker, per shard.

use std::{
    cell::{Cell, RefCell},
    collections::BTreeMap,
    time::Instant,
};

use super::PartitionKey;
use crate::metadata::placement::NodeId;

/// One partition of a session.
#[derive(Debug, Clone, Copy)]
pub struct SessionPartition {
    /// The leader epoch it is followed at.
    pub epoch: i32,
    /// After a failure of its own, it sits out the fetches until then.
    pub retry_at: Option<Instant>,
    /// Its failures in a row.
    pub failures: u32,
}

/// The partitions a follower shard fetches from one leader node.
#[derive(Debug)]
pub struct FetchSession {
    /// The leader node.
    pub leader: NodeId,
    partitions: RefCell<BTreeMap<PartitionKey, SessionPartition>>,
    stopped: Cell<bool>,
}

impl FetchSession {
    /// An empty session with `leader`.
    pub fn new(leader: NodeId) -> FetchSession {
        FetchSession {
            leader,
            partitions: RefCell::new(BTreeMap::new()),
            stopped: Cell::new(false),
        }
    }

    /// Follows `key` at `epoch` here (again at once, if it was sitting out).
    pub fn add(&self, key: PartitionKey, epoch: i32) {
        self.partitions.borrow_mut().insert(
            key,
            SessionPartition {
                epoch,
                retry_at: None,
                failures: 0,
            },
        );
    }

    /// Stops following `key` here; true when that left no partition.
    pub fn remove(&self, key: &PartitionKey) -> bool {
        let mut parts = self.partitions.borrow_mut();
        parts.remove(key).is_some() && parts.is_empty()
    }

    /// The partitions followed here.
    pub fn keys(&self) -> Vec<PartitionKey> {
        self.partitions.borrow().keys().cloned().collect()
    }

    /// The partitions to fetch at `now` (not sitting out), with their epochs.
    pub fn due(&self, now: Instant) -> Vec<(PartitionKey, i32)> {
        self.partitions
            .borrow()
            .iter()
            .filter(|(_, p)| p.retry_at.is_none_or(|t| t <= now))
            .map(|(k, p)| (k.clone(), p.epoch))
            .collect()
    }

    /// True while `key` is followed here at `epoch`: what a fetch answered for it still
    /// applies.
    pub fn current(&self, key: &PartitionKey, epoch: i32) -> bool {
        self.partitions
            .borrow()
            .get(key)
            .is_some_and(|p| p.epoch == epoch)
    }

    /// `key` failed by itself: it sits out the fetches until `until`. Returns its
    /// failures so far, this one included (0 when it is not followed here).
    pub fn sit_out(&self, key: &PartitionKey, until: Instant) -> u32 {
        match self.partitions.borrow_mut().get_mut(key) {
            Some(p) => {
                p.retry_at = Some(until);
                p.failures += 1;
                p.failures
            }
            None => 0,
        }
    }

    /// Ends the session: its fetcher stops after its current round.
    pub fn stop(&self) {
        self.stopped.set(true);
    }

    /// True once [`stop`](Self::stop) was called.
    pub fn stopped(&self) -> bool {
        self.stopped.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn partitions_sit_out_after_their_own_failures_only() {
        let s = FetchSession::new(1024);
        let a = ("t".to_string(), 0);
        let b = ("t".to_string(), 1);
        s.add(a.clone(), 3);
        s.add(b.clone(), 3);
        let now = Instant::now();
        s.sit_out(&a, now + Duration::from_secs(1));
        assert_eq!(s.due(now), [(b.clone(), 3)]);
        assert_eq!(s.due(now + Duration::from_secs(1)).len(), 2);
        assert!(s.current(&a, 3) && !s.current(&a, 4));
        s.add(a.clone(), 4);
        assert_eq!(s.due(now).len(), 2, "a new epoch is fetched at once");
        assert!(!s.remove(&a));
        assert_eq!(s.keys(), std::slice::from_ref(&b));
        assert!(s.remove(&b), "empty");
        assert!(!s.remove(&b), "not followed here");
    }
}
