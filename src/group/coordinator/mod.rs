//! The consumer-group coordinator of one shard: the classic Kafka group protocol
//! (JoinGroup, SyncGroup, Heartbeat, LeaveGroup: `membership.rs`) over the groups
//! placement gives this shard — each group a [`super::state::Group`] state machine — and
//! offset commits through the [`OffsetStore`] (`offsets.rs`; a transaction's pending
//! offsets, `txn_offsets.rs`). This file holds the groups and what reads them.
//!
//! A rebalance completes when every member has rejoined or the rebalance timeout passes
//! (members that did not rejoin are removed). Members that stop heartbeating for their
//! session timeout are removed. New members first get MEMBER_ID_REQUIRED with an id to
//! rejoin with (JoinGroup v4+).
//!
//! Offset commits from members are fenced by generation; commits with generation -1
//! (simple consumers, reset tools) are accepted only while the group has no members.
//! A commit is answered after it is durable: LMDB writes run on the blocking pool and
//! share one fsync per batch ([`OffsetSyncer`]). Every refusal is a Kafka error.

use std::{
    cell::RefCell,
    collections::{BTreeMap, HashMap},
    rc::Rc,
    sync::Arc,
    time::Instant,
};

use kafka_protocol::ResponseError;

use crate::keyed_lock::KeyedLocks;
use crate::storage::StorageError;

use super::{
    journal::{Journal, JournalError, JournalPass, JournalRecord},
    offset_store::{CommittedOffset, OffsetStore},
    offset_syncer::OffsetSyncer,
    state::{DescribedGroup, Group, GroupState},
};

/// One shard's coordinator. `!Send`.
pub struct Coordinator {
    groups: RefCell<HashMap<String, Group>>,
    store: Arc<OffsetStore>,
    syncer: OffsetSyncer,
    next_member: RefCell<u64>,
    /// One lock per transactional producer: its offsets pending here change one
    /// request at a time (see [`producer_lock`](Self::producer_lock)).
    producers: KeyedLocks<i64>,
    /// The highest epoch of a transaction marker that reached this shard's groups,
    /// per producer id, since the shard started, and when the last one came (see
    /// [`note_marker`](Self::note_marker)); forgotten with the producer.
    marker_epochs: RefCell<HashMap<i64, (i16, Instant)>>,
}

/// An offset to commit: topic, partition, and what to store.
pub type OffsetToCommit = (String, u32, CommittedOffset);

impl Coordinator {
    /// A coordinator over `store`; call [`expire`](Self::expire) every 100 ms beside it
    /// (the shard's tasks do).
    pub fn new(store: Arc<OffsetStore>) -> Rc<Coordinator> {
        Rc::new(Coordinator {
            groups: RefCell::new(HashMap::new()),
            syncer: OffsetSyncer::new(Arc::clone(&store)),
            store,
            next_member: RefCell::new(0),
            producers: KeyedLocks::default(),
            marker_epochs: RefCell::new(HashMap::new()),
        })
    }

    /// Removes members whose session expired and completes rebalances whose timeout
    /// passed.
    pub fn expire(&self, now: Instant) {
        let mut groups = self.groups.borrow_mut();
        for (id, g) in groups.iter_mut() {
            g.expire(id, now);
        }
    }

    /// Drops the groups `keep` refuses — this shard no longer coordinates them (their
    /// journal partition moved): every member waiting in a JoinGroup or SyncGroup is
    /// answered NOT_COORDINATOR at once, so its client finds the new coordinator instead
    /// of waiting out the rebalance timeout, and a group that comes back later starts
    /// again from its committed generation, not from this shard's stale state. Returns
    /// the groups dropped.
    pub fn evict(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let mut groups = self.groups.borrow_mut();
        let gone: Vec<String> = groups.keys().filter(|g| !keep(g)).cloned().collect();
        for id in &gone {
            if let Some(mut group) = groups.remove(id) {
                group.fail_waiters(ResponseError::NotCoordinator);
                tracing::info!(group = %id, "no longer coordinating a group: dropped its state here");
            }
        }
        gone
    }

    /// The store, for OffsetFetch.
    pub fn store(&self) -> &Arc<OffsetStore> {
        &self.store
    }

    /// Every group this shard coordinates that has members, plus `with_offsets` (groups
    /// with committed offsets), with its protocol type and state.
    pub fn list(&self, with_offsets: Vec<String>) -> Vec<(String, String, GroupState)> {
        let groups = self.groups.borrow();
        let mut out: BTreeMap<String, (String, GroupState)> = with_offsets
            .into_iter()
            .map(|g| (g, ("consumer".to_string(), GroupState::Empty)))
            .collect();
        for (id, g) in groups.iter() {
            let protocol_type = g.protocol_type.clone().unwrap_or_else(|| "consumer".into());
            out.insert(id.clone(), (protocol_type, g.state));
        }
        out.into_iter().map(|(id, (t, s))| (id, t, s)).collect()
    }

    /// A group's state, protocol type, chosen protocol and members (see
    /// [`Group::described`]).
    pub fn members(&self, group: &str) -> Option<DescribedGroup> {
        self.groups.borrow().get(group).map(Group::described)
    }

    /// The state and generation of a group, if it exists.
    pub fn describe(&self, group: &str) -> Option<(GroupState, i32, usize)> {
        self.groups
            .borrow()
            .get(group)
            .map(|g| (g.state, g.generation, g.members.len()))
    }
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

mod membership;
mod offsets;
#[cfg(test)]
mod tests;
mod txn_offsets;

/// Appends `record` to the group's journal partition and waits until it is committed;
/// the Kafka error the client gets when that fails.
/// Journals the change `record` makes when there is a journal (a cluster); the pass,
/// when there is one, is to be held until the change is in LMDB.
async fn journal_first(
    journal: Option<&Journal>,
    record: impl FnOnce() -> JournalRecord,
) -> Result<Option<JournalPass>, ResponseError> {
    let Some(journal) = journal else {
        return Ok(None);
    };
    let record = record();
    journal.append(&record).await.map(Some).map_err(|e| {
        tracing::warn!(group = record.group(), error = %e, "not journaled");
        match e {
            // This shard stopped leading the journal partition: coordinated elsewhere.
            JournalError::Storage(StorageError::NotLeader(_) | StorageError::Closed(_)) => {
                ResponseError::NotCoordinator
            }
            _ => ResponseError::KafkaStorageError,
        }
    })
}
