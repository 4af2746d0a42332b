//! The state machine of one consumer group, as in Kafka: `Empty` (no members) →
//! `PreparingRebalance` (members rejoin; JoinGroup requests wait) →
//! `CompletingRebalance` (joined; the leader's SyncGroup carries the assignment) →
//! `Stable`. The shard's coordinator drives it; this file holds the transitions.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::{Duration, Instant},
};

use bytes::Bytes;
use glommio::channels::local_channel::LocalSender;
use kafka_protocol::ResponseError;

/// Shortest session timeout a member may ask for.
pub const SESSION_TIMEOUT_MIN: Duration = Duration::from_millis(1000);
/// Longest session timeout a member may ask for.
pub const SESSION_TIMEOUT_MAX: Duration = Duration::from_secs(1800);
/// Most members one group may have.
pub const MEMBERS_MAX: usize = 1000;

/// A group's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Assigned and running.
    Stable,
}

impl GroupState {
    /// Kafka's name for the state (DescribeGroups, ListGroups).
    pub fn kafka_name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

/// What a JoinGroup gets back.
#[derive(Debug, Clone, Default)]
pub struct JoinResult {
    /// The Kafka error, if the call failed.
    pub error: Option<ResponseError>,
    /// The new generation.
    pub generation: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol (assignor).
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// This member's id.
    pub member_id: String,
    /// For the leader: every member with its metadata for the chosen protocol.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

/// What a SyncGroup gets back.
#[derive(Debug, Clone, Default)]
pub struct SyncResult {
    /// The Kafka error, if the call failed.
    pub error: Option<ResponseError>,
    /// This member's assignment.
    pub assignment: Bytes,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol.
    pub protocol_name: Option<String>,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct DescribedGroup {
    /// Its state.
    pub state: GroupState,
    /// Its protocol type ("consumer").
    pub protocol_type: String,
    /// The chosen protocol (assignor), empty before the first rebalance.
    pub protocol: String,
    /// Its members.
    pub members: Vec<DescribedMember>,
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct DescribedMember {
    /// The member id.
    pub member_id: String,
    /// The static membership id, if any.
    pub instance_id: Option<String>,
    /// The client id it joined with.
    pub client_id: String,
    /// Its metadata for the chosen protocol.
    pub metadata: Bytes,
    /// Its assignment.
    pub assignment: Bytes,
}

/// A JoinGroup request's fields.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// The group.
    pub group: String,
    /// The member id, empty for a new member.
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
    /// The client id, used to name new members.
    pub client_id: String,
    /// Session timeout.
    pub session_timeout: Duration,
    /// Rebalance timeout.
    pub rebalance_timeout: Duration,
    /// Protocol type ("consumer").
    pub protocol_type: String,
    /// Supported protocols in preference order, with metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// Whether the client understands MEMBER_ID_REQUIRED (v4+).
    pub require_known_member_id: bool,
}

pub(super) struct Member {
    pub(super) client_id: String,
    pub(super) instance_id: Option<String>,
    pub(super) session_timeout: Duration,
    pub(super) rebalance_timeout: Duration,
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    pub(super) last_seen: Instant,
    pub(super) join_reply: Option<LocalSender<JoinResult>>,
    pub(super) sync_reply: Option<LocalSender<SyncResult>>,
}

pub(super) struct Group {
    pub(super) state: GroupState,
    pub(super) generation: i32,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol: Option<String>,
    pub(super) leader: Option<String>,
    pub(super) members: BTreeMap<String, Member>,
    pub(super) pending: HashSet<String>,
    /// Static members: `group.instance.id` → current member id.
    pub(super) static_members: HashMap<String, String>,
    pub(super) rebalance_deadline: Option<Instant>,
}

impl Group {
    /// A group whose next generation comes after `generation` (0 for a new group).
    pub(super) fn starting_after(generation: i32) -> Group {
        Group {
            state: GroupState::Empty,
            generation: generation.max(0),
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: HashSet::new(),
            static_members: HashMap::new(),
            rebalance_deadline: None,
        }
    }

    pub(super) fn prepare_rebalance(&mut self, now: Instant) {
        if self.state == GroupState::PreparingRebalance {
            return;
        }
        // Syncs waiting for an assignment of the old generation will not get one.
        for m in self.members.values_mut() {
            if let Some(reply) = m.sync_reply.take() {
                let _ = reply.try_send(SyncResult {
                    error: Some(ResponseError::RebalanceInProgress),
                    ..SyncResult::default()
                });
            }
        }
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::ZERO);
        self.state = GroupState::PreparingRebalance;
        self.rebalance_deadline = Some(now + timeout);
    }

    pub(super) fn all_rejoined(&self) -> bool {
        self.members.values().all(|m| m.join_reply.is_some())
    }

    /// Ends the join phase: members that did not rejoin are dropped, the generation
    /// moves on, a protocol every member supports is chosen, and every waiting
    /// JoinGroup is answered (the leader with the member list).
    pub(super) fn complete_join(&mut self) {
        self.members.retain(|_, m| m.join_reply.is_some());
        self.generation += 1;
        self.rebalance_deadline = None;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.leader = None;
            self.protocol = None;
            self.protocol_type = None;
            return;
        }
        self.protocol = self.choose_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.state = GroupState::CompletingRebalance;
        let leader = self.leader.clone().unwrap_or_default();
        let protocol = self.protocol.clone();
        let metadata = self.member_metadata();
        for (id, m) in self.members.iter_mut() {
            m.assignment = Bytes::new();
            if let Some(reply) = m.join_reply.take() {
                let _ = reply.try_send(JoinResult {
                    error: None,
                    generation: self.generation,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: protocol.clone(),
                    leader: leader.clone(),
                    member_id: id.clone(),
                    members: if *id == leader {
                        metadata.clone()
                    } else {
                        Vec::new()
                    },
                });
            }
        }
    }

    /// Every member with its instance id and its metadata for the chosen protocol: what
    /// the leader's JoinGroup response carries.
    pub(super) fn member_metadata(&self) -> Vec<(String, Option<String>, Bytes)> {
        self.members
            .iter()
            .map(|(id, m)| {
                let meta = m
                    .protocols
                    .iter()
                    .find(|(name, _)| Some(name) == self.protocol.as_ref())
                    .map(|(_, meta)| meta.clone())
                    .unwrap_or_default();
                (id.clone(), m.instance_id.clone(), meta)
            })
            .collect()
    }

    /// The protocol with the most votes, each member voting for its first choice among
    /// the protocols every member supports (Kafka's rule).
    pub(super) fn choose_protocol(&self) -> Option<String> {
        let mut candidates: Option<HashSet<&String>> = None;
        for m in self.members.values() {
            let mine: HashSet<&String> = m.protocols.iter().map(|(n, _)| n).collect();
            candidates = Some(match candidates {
                None => mine,
                Some(c) => c.intersection(&mine).copied().collect(),
            });
        }
        let candidates = candidates?;
        let mut votes: BTreeMap<&String, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                *votes.entry(name).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(_, v)| *v)
            .map(|(n, _)| n.clone())
    }

    /// True when `instance` belongs to a static member other than `member_id`: the
    /// caller is an older incarnation of a restarted static member.
    pub(super) fn fenced(&self, instance: Option<&str>, member_id: &str) -> bool {
        instance
            .and_then(|i| self.static_members.get(i))
            .is_some_and(|current| current != member_id)
    }

    /// A static member restarted without its member id: it takes over its old
    /// identity and assignment as `fresh`, without a rebalance; an old JoinGroup of
    /// `current` still waiting is fenced. Returns whether it was the leader.
    pub(super) fn replace_static_member(
        &mut self,
        instance: &str,
        current: &str,
        fresh: &str,
        protocols: &[(String, Bytes)],
        now: Instant,
    ) -> bool {
        if let Some(mut m) = self.members.remove(current) {
            if let Some(old) = m.join_reply.take() {
                let _ = old.try_send(JoinResult {
                    error: Some(ResponseError::FencedInstanceId),
                    ..JoinResult::default()
                });
            }
            m.last_seen = now;
            m.protocols = protocols.to_vec();
            self.members.insert(fresh.to_string(), m);
        }
        self.static_members
            .insert(instance.to_string(), fresh.to_string());
        let was_leader = self.leader.as_deref() == Some(current);
        if was_leader {
            self.leader = Some(fresh.to_string());
        }
        was_leader
    }

    /// What a static member that rejoined a Stable group gets: Kafka answers it with the
    /// current generation; a rejoining leader also gets the member list, and the
    /// assignment its SyncGroup sends is ignored (the group is Stable, so SyncGroup
    /// returns the stored assignments).
    pub(super) fn stable_rejoin(&self, member_id: String, was_leader: bool) -> JoinResult {
        JoinResult {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id,
            members: if was_leader {
                self.member_metadata()
            } else {
                Vec::new()
            },
        }
    }

    /// The topics the group's members consume, read from their subscriptions (the
    /// consumer protocol's metadata for the chosen assignor); `None` when some member's
    /// subscription cannot be read (another protocol type): the caller then treats every
    /// topic as consumed, as Kafka does. Empty for a group without members.
    pub(super) fn subscribed_topics(&self) -> Option<HashSet<String>> {
        use kafka_protocol::{messages::ConsumerProtocolSubscription, protocol::Decodable};
        let mut topics = HashSet::new();
        if self.members.is_empty() {
            return Some(topics);
        }
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        for m in self.members.values() {
            let mut meta = m
                .protocols
                .iter()
                .find(|(name, _)| Some(name) == self.protocol.as_ref())
                .map(|(_, meta)| meta.clone())?;
            if meta.len() < 2 {
                return None;
            }
            let version = i16::from_be_bytes([meta[0], meta[1]]);
            bytes::Buf::advance(&mut meta, 2);
            let subscription =
                ConsumerProtocolSubscription::decode(&mut meta, version.clamp(0, 3)).ok()?;
            topics.extend(subscription.topics.iter().map(|t| t.as_str().to_string()));
        }
        Some(topics)
    }

    /// The group as DescribeGroups shows it.
    pub(super) fn described(&self) -> DescribedGroup {
        let protocol = self.protocol.clone().unwrap_or_default();
        let members = self
            .members
            .iter()
            .map(|(id, m)| DescribedMember {
                member_id: id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                metadata: m
                    .protocols
                    .iter()
                    .find(|(n, _)| *n == protocol)
                    .map(|(_, b)| b.clone())
                    .unwrap_or_default(),
                assignment: m.assignment.clone(),
            })
            .collect();
        DescribedGroup {
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol,
            members,
        }
    }

    /// Completes a rebalance whose timeout passed and removes members whose session
    /// expired, as of `now`.
    pub(super) fn expire(&mut self, group_id: &str, now: Instant) {
        if self.state == GroupState::PreparingRebalance
            && self.rebalance_deadline.is_some_and(|d| d <= now)
        {
            tracing::info!(group = %group_id, "rebalance timeout: dropping members that did not rejoin");
            self.complete_join();
        }
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.join_reply.is_none() && m.last_seen + m.session_timeout <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for member in expired {
            tracing::info!(group = %group_id, %member, "session expired");
            self.remove_member(&member, now);
        }
    }

    /// Answers every member waiting in a JoinGroup or a SyncGroup with `error`.
    pub(super) fn fail_waiters(&mut self, error: ResponseError) {
        for (id, m) in self.members.iter_mut() {
            if let Some(reply) = m.join_reply.take() {
                let _ = reply.try_send(JoinResult {
                    error: Some(error),
                    generation: -1,
                    member_id: id.clone(),
                    ..JoinResult::default()
                });
            }
            if let Some(reply) = m.sync_reply.take() {
                let _ = reply.try_send(SyncResult {
                    error: Some(error),
                    ..SyncResult::default()
                });
            }
        }
    }

    pub(super) fn remove_member(&mut self, id: &str, now: Instant) {
        self.static_members.retain(|_, m| m != id);
        if let Some(m) = self.members.remove(id) {
            if let Some(reply) = m.join_reply {
                let _ = reply.try_send(JoinResult {
                    error: Some(ResponseError::UnknownMemberId),
                    ..JoinResult::default()
                });
            }
        }
        match self.state {
            GroupState::PreparingRebalance => {
                if self.all_rejoined() {
                    self.complete_join();
                }
            }
            _ if self.members.is_empty() => {
                self.state = GroupState::Empty;
                self.generation += 1;
                self.leader = None;
            }
            _ => self.prepare_rebalance(now),
        }
    }
}
