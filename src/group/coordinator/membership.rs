//! Membership: the classic group protocol's JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup at one shard's coordinator, each over its group's state machine
//! ([`Group`](crate::group::state::Group)).

use std::{sync::Arc, time::Instant};

use bytes::Bytes;
use glommio::channels::local_channel;
use kafka_protocol::ResponseError;

use super::{rand_seed, Coordinator};
use crate::group::state::{
    Group, GroupState, JoinRequest, JoinResult, Member, SyncResult, MEMBERS_MAX,
    SESSION_TIMEOUT_MAX, SESSION_TIMEOUT_MIN,
};

impl Coordinator {
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
}
