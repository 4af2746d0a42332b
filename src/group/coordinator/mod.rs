//! The consumer-group coordinator of one shard: the classic Kafka group protocol
//! (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) over the groups placement gives this
//! shard — each group a [`super::state::Group`] state machine — and offset commits
//! through the [`OffsetStore`].
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

use bytes::Bytes;
use glommio::channels::local_channel;
use kafka_protocol::ResponseError;

use crate::keyed_lock::KeyedLocks;
use crate::storage::StorageError;

use super::{
    journal::{Journal, JournalError, JournalPass, JournalRecord},
    offset_store::{CommitOutcome, CommittedOffset, Fence, OffsetStore},
    offset_syncer::OffsetSyncer,
    state::{
        DescribedGroup, Group, GroupState, JoinRequest, JoinResult, Member, SyncResult,
        MEMBERS_MAX, SESSION_TIMEOUT_MAX, SESSION_TIMEOUT_MIN,
    },
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

    fn new_member_id(&self, client_id: &str, now: Instant) -> String {
        let mut n = self.next_member.borrow_mut();
        *n += 1;
        format!(
            "{client_id}-{:016x}{:08x}",
            now.elapsed().as_nanos() as u64 ^ rand_seed(),
            *n
        )
    }

    /// JoinGroup: answers once the rebalance completes (or at once with an error or
    /// MEMBER_ID_REQUIRED).
    pub async fn join(&self, req: JoinRequest) -> JoinResult {
        let now = Instant::now();
        let fail = |e: ResponseError, member_id: String| JoinResult {
            error: Some(e),
            member_id,
            generation: -1,
            ..JoinResult::default()
        };
        if !(SESSION_TIMEOUT_MIN..=SESSION_TIMEOUT_MAX).contains(&req.session_timeout) {
            return fail(ResponseError::InvalidSessionTimeout, req.member_id);
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return fail(ResponseError::InconsistentGroupProtocol, req.member_id);
        }
        // A group new to this coordinator (after a restart, or moved here with its
        // journal partition) continues from the generations its offsets were committed
        // in, and from those of offsets pending in a transaction (its marker may commit
        // them later): a lower one would be fenced out of its own offsets, every commit
        // of the group silently unchanged until its generation caught up.
        let floor = if self.groups.borrow().contains_key(&req.group) {
            0
        } else {
            let store = Arc::clone(&self.store);
            let group = req.group.clone();
            let stored = glommio::executor()
                .spawn_blocking(move || {
                    let committed = store
                        .fetch_group(&group)?
                        .iter()
                        .map(|(_, _, c)| c.generation)
                        .max()
                        .unwrap_or(0);
                    Ok::<_, crate::group::offset_store::OffsetStoreError>(
                        committed.max(store.pending_generation(&group)?),
                    )
                })
                .await;
            match stored {
                Ok(floor) => floor,
                Err(e) => {
                    tracing::error!(group = %req.group, error = %e, "group's offsets unreadable");
                    return fail(ResponseError::CoordinatorNotAvailable, req.member_id);
                }
            }
        };
        let rx = {
            let mut groups = self.groups.borrow_mut();
            let g = groups
                .entry(req.group.clone())
                .or_insert_with(|| Group::starting_after(floor));
            if g.protocol_type
                .as_ref()
                .is_some_and(|t| *t != req.protocol_type)
                && !g.members.is_empty()
            {
                return fail(ResponseError::InconsistentGroupProtocol, req.member_id);
            }
            let mut member_id = req.member_id.clone();
            if let Some(instance) = req.group_instance_id.as_deref() {
                let current = g.static_members.get(instance).cloned();
                match current {
                    Some(current) if member_id.is_empty() => {
                        let fresh = self.new_member_id(&req.client_id, now);
                        let was_leader = g.replace_static_member(
                            instance,
                            &current,
                            &fresh,
                            &req.protocols,
                            now,
                        );
                        if g.state == GroupState::Stable {
                            return g.stable_rejoin(fresh, was_leader);
                        }
                        member_id = fresh;
                    }
                    Some(current) if current != member_id => {
                        return fail(ResponseError::FencedInstanceId, member_id);
                    }
                    Some(_) => {}
                    None if member_id.is_empty() => {
                        // A new static member is admitted at once: its instance id
                        // already identifies it, so no MEMBER_ID_REQUIRED round trip.
                        member_id = self.new_member_id(&req.client_id, now);
                        g.static_members
                            .insert(instance.to_string(), member_id.clone());
                        g.pending.insert(member_id.clone());
                    }
                    None => return fail(ResponseError::UnknownMemberId, member_id),
                }
            }
            if member_id.is_empty() {
                member_id = self.new_member_id(&req.client_id, now);
                if req.require_known_member_id {
                    g.pending.insert(member_id.clone());
                    return fail(ResponseError::MemberIdRequired, member_id);
                }
            } else if !g.members.contains_key(&member_id) && !g.pending.remove(&member_id) {
                return fail(ResponseError::UnknownMemberId, member_id);
            }
            if g.members.len() >= MEMBERS_MAX && !g.members.contains_key(&member_id) {
                return fail(ResponseError::GroupMaxSizeReached, member_id);
            }
            let (tx, rx) = local_channel::new_bounded(1);
            let member = g
                .members
                .entry(member_id.clone())
                .or_insert_with(|| Member {
                    client_id: req.client_id.clone(),
                    instance_id: req.group_instance_id.clone(),
                    session_timeout: req.session_timeout,
                    rebalance_timeout: req.rebalance_timeout,
                    protocols: Vec::new(),
                    assignment: Bytes::new(),
                    last_seen: now,
                    join_reply: None,
                    sync_reply: None,
                });
            member.protocols = req.protocols.clone();
            member.session_timeout = req.session_timeout;
            member.rebalance_timeout = req.rebalance_timeout;
            member.last_seen = now;
            if let Some(old) = member.join_reply.replace(tx) {
                let _ = old.try_send(JoinResult {
                    error: Some(ResponseError::UnknownMemberId),
                    ..JoinResult::default()
                });
            }
            g.protocol_type = Some(req.protocol_type.clone());
            g.prepare_rebalance(now);
            if g.all_rejoined() {
                g.complete_join();
            }
            rx
        };
        rx.recv().await.unwrap_or(JoinResult {
            error: Some(ResponseError::UnknownMemberId),
            ..JoinResult::default()
        })
    }

    /// SyncGroup: the leader hands out assignments; every member gets its own.
    pub async fn sync(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        instance: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> SyncResult {
        let error = |e: ResponseError| SyncResult {
            error: Some(e),
            ..SyncResult::default()
        };
        let rx = {
            let mut groups = self.groups.borrow_mut();
            let Some(g) = groups.get_mut(group) else {
                return error(ResponseError::UnknownMemberId);
            };
            if g.fenced(instance, member_id) {
                return error(ResponseError::FencedInstanceId);
            }
            let Some(member) = g.members.get_mut(member_id) else {
                return error(ResponseError::UnknownMemberId);
            };
            member.last_seen = Instant::now();
            if generation != g.generation {
                return error(ResponseError::IllegalGeneration);
            }
            match g.state {
                GroupState::PreparingRebalance | GroupState::Empty => {
                    return error(ResponseError::RebalanceInProgress)
                }
                GroupState::Stable => {
                    return SyncResult {
                        error: None,
                        assignment: member.assignment.clone(),
                        protocol_type: g.protocol_type.clone(),
                        protocol_name: g.protocol.clone(),
                    }
                }
                GroupState::CompletingRebalance => {}
            }
            let (tx, rx) = local_channel::new_bounded(1);
            member.sync_reply = Some(tx);
            if g.leader.as_deref() == Some(member_id) {
                for (id, assignment) in assignments {
                    if let Some(m) = g.members.get_mut(&id) {
                        m.assignment = assignment;
                    }
                }
                g.state = GroupState::Stable;
                let (ptype, pname) = (g.protocol_type.clone(), g.protocol.clone());
                for m in g.members.values_mut() {
                    if let Some(reply) = m.sync_reply.take() {
                        let _ = reply.try_send(SyncResult {
                            error: None,
                            assignment: m.assignment.clone(),
                            protocol_type: ptype.clone(),
                            protocol_name: pname.clone(),
                        });
                    }
                }
            }
            rx
        };
        rx.recv().await.unwrap_or(SyncResult {
            error: Some(ResponseError::RebalanceInProgress),
            ..SyncResult::default()
        })
    }

    /// Heartbeat: keeps a member's session alive and tells it of rebalances.
    pub fn heartbeat(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<(), ResponseError> {
        let mut groups = self.groups.borrow_mut();
        let Some(g) = groups.get_mut(group) else {
            return Err(ResponseError::UnknownMemberId);
        };
        if g.fenced(instance, member_id) {
            return Err(ResponseError::FencedInstanceId);
        }
        let state = g.state;
        let current = g.generation;
        let Some(member) = g.members.get_mut(member_id) else {
            return Err(ResponseError::UnknownMemberId);
        };
        member.last_seen = Instant::now();
        if generation != current {
            return Err(ResponseError::IllegalGeneration);
        }
        match state {
            GroupState::PreparingRebalance => Err(ResponseError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// LeaveGroup: removes members; the rest rebalance.
    pub fn leave(&self, group: &str, member_ids: &[String]) -> Vec<Result<(), ResponseError>> {
        let now = Instant::now();
        let mut groups = self.groups.borrow_mut();
        let Some(g) = groups.get_mut(group) else {
            return member_ids
                .iter()
                .map(|_| Err(ResponseError::UnknownMemberId))
                .collect();
        };
        member_ids
            .iter()
            .map(|id| {
                if g.members.contains_key(id) {
                    g.remove_member(id, now);
                    Ok(())
                } else {
                    Err(ResponseError::UnknownMemberId)
                }
            })
            .collect()
    }

    /// How a commit by `member_id` of `generation` is fenced, or why it is refused
    /// (OffsetCommit's rules, which TxnOffsetCommit v3+ shares).
    pub(super) fn commit_fence(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<Fence, ResponseError> {
        let mut groups = self.groups.borrow_mut();
        if groups
            .get(group)
            .is_some_and(|g| g.fenced(instance, member_id))
        {
            return Err(ResponseError::FencedInstanceId);
        }
        let g = groups.get_mut(group);
        match g {
            None if generation < 0 => Ok(Fence::Reset),
            None => Err(ResponseError::IllegalGeneration),
            Some(g) if generation < 0 && member_id.is_empty() => {
                if g.members.is_empty() {
                    Ok(Fence::Reset)
                } else {
                    Err(ResponseError::UnknownMemberId)
                }
            }
            Some(g) => match g.members.get_mut(member_id) {
                None => Err(ResponseError::UnknownMemberId),
                Some(_) if generation != g.generation => Err(ResponseError::IllegalGeneration),
                // As Kafka: a member of the current generation may commit while
                // the group prepares a rebalance (consumers commit what they
                // processed when their partitions are revoked), but not between
                // the join and the new assignment.
                Some(_) if g.state == GroupState::CompletingRebalance => {
                    Err(ResponseError::RebalanceInProgress)
                }
                Some(m) => {
                    m.last_seen = Instant::now();
                    Ok(Fence::Generation(generation))
                }
            },
        }
    }

    /// OffsetCommit: checks the committer, writes the offsets (on the blocking pool) and
    /// answers once they are durable; one error code per partition.
    pub async fn commit(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        instance: Option<&str>,
        offsets: Vec<OffsetToCommit>,
        journal: Option<Journal>,
    ) -> Vec<Result<(), ResponseError>> {
        let fence = match self.commit_fence(group, generation, member_id, instance) {
            Ok(f) => f,
            Err(e) => return offsets.iter().map(|_| Err(e)).collect(),
        };
        let n = offsets.len();
        // Committed to the journal first: applied here only what survives a host.
        let _pass = match journal_first(journal.as_ref(), || JournalRecord::Commit {
            group: group.to_string(),
            fence,
            offsets: offsets.clone(),
        })
        .await
        {
            Ok(pass) => pass,
            Err(code) => return vec![Err(code); n],
        };
        let store = Arc::clone(&self.store);
        let group_id = group.to_string();
        let written = glommio::executor()
            .spawn_blocking(move || {
                let refs: Vec<(&str, u32, CommittedOffset)> = offsets
                    .iter()
                    .map(|(t, p, c)| (t.as_str(), *p, c.clone()))
                    .collect();
                store.commit(&group_id, fence, &refs)
            })
            .await;
        let outcomes = match written {
            Ok(o) => o,
            Err(e) => {
                tracing::error!(group, error = %e, "offset commit failed");
                return vec![Err(ResponseError::KafkaStorageError); n];
            }
        };
        if let Err(e) = self.syncer.sync().await {
            tracing::error!(group, error = %e, "offset sync failed");
            return vec![Err(ResponseError::KafkaStorageError); n];
        }
        outcomes
            .iter()
            .map(|o| match o {
                CommitOutcome::Applied | CommitOutcome::Unchanged => Ok(()),
            })
            .collect()
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

    /// OffsetDelete: removes the group's committed offsets of the given partitions. A
    /// topic the group's members consume is refused per partition with
    /// GROUP_SUBSCRIBED_TO_TOPIC; a group with neither members nor offsets is
    /// GROUP_ID_NOT_FOUND.
    pub async fn delete_offsets(
        &self,
        group: &str,
        partitions: Vec<(String, u32)>,
        journal: Option<Journal>,
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let subscribed = self
            .groups
            .borrow()
            .get(group)
            .map(Group::subscribed_topics);
        let consumed = |topic: &str| match &subscribed {
            None => false,
            Some(None) => true,
            Some(Some(topics)) => topics.contains(topic),
        };
        let outcomes: Vec<Result<(), ResponseError>> = partitions
            .iter()
            .map(|(topic, _)| {
                if consumed(topic) {
                    Err(ResponseError::GroupSubscribedToTopic)
                } else {
                    Ok(())
                }
            })
            .collect();
        let doomed: Vec<(String, u32)> = partitions
            .into_iter()
            .zip(&outcomes)
            .filter(|(_, o)| o.is_ok())
            .map(|(p, _)| p)
            .collect();
        let journal = journal.filter(|_| !doomed.is_empty());
        let _pass = journal_first(journal.as_ref(), || JournalRecord::DeleteOffsets {
            group: group.to_string(),
            partitions: doomed.clone(),
        })
        .await?;
        let store = Arc::clone(&self.store);
        let id = group.to_string();
        let known = subscribed.is_some();
        let result = glommio::executor()
            .spawn_blocking(move || {
                let has_offsets = !store.fetch_group(&id)?.is_empty();
                let deleted = store.delete_offsets(&id, &doomed)?;
                Ok::<_, crate::group::offset_store::OffsetStoreError>((has_offsets, deleted))
            })
            .await;
        match result {
            Ok((false, _)) if !known => Err(ResponseError::GroupIdNotFound),
            Ok((_, 0)) => Ok(outcomes),
            Ok(_) => match self.syncer.sync().await {
                Ok(()) => Ok(outcomes),
                Err(e) => {
                    tracing::error!(group, error = %e, "offset sync failed");
                    Err(ResponseError::KafkaStorageError)
                }
            },
            Err(e) => {
                tracing::error!(group, error = %e, "deleting offsets failed");
                Err(ResponseError::KafkaStorageError)
            }
        }
    }

    /// Deletes a group with no members and its committed offsets.
    pub async fn delete(&self, group: &str, journal: Option<Journal>) -> Result<(), ResponseError> {
        if self
            .groups
            .borrow()
            .get(group)
            .is_some_and(|g| !g.members.is_empty())
        {
            return Err(ResponseError::NonEmptyGroup);
        }
        let _pass = journal_first(journal.as_ref(), || JournalRecord::DeleteGroup {
            group: group.to_string(),
        })
        .await?;
        {
            let mut groups = self.groups.borrow_mut();
            if let Some(g) = groups.get(group) {
                if !g.members.is_empty() {
                    return Err(ResponseError::NonEmptyGroup);
                }
                groups.remove(group);
            }
        }
        let store = Arc::clone(&self.store);
        let id = group.to_string();
        match glommio::executor()
            .spawn_blocking(move || store.delete_group(&id))
            .await
        {
            Ok(0) => Err(ResponseError::GroupIdNotFound),
            Ok(_) => self.syncer.sync().await.map_err(|e| {
                tracing::error!(group, error = %e, "offset sync failed");
                ResponseError::KafkaStorageError
            }),
            Err(e) => {
                tracing::error!(group, error = %e, "deleting group offsets failed");
                Err(ResponseError::KafkaStorageError)
            }
        }
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
