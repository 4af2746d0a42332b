//! Consumer-group membership for `--group`: a run's consumers read as one member of the
//! group, as a Kafka consumer would. Joining finds the coordinator, joins (answering
//! MEMBER_ID_REQUIRED), and syncs — as leader, loadgen assigns the topic's partitions to
//! the members in sorted order, every n-th partition to each. During the run a session
//! heartbeats and commits the positions the consumers reached every commit interval;
//! at the end it commits a last time and leaves. Rebalances are not followed: a
//! heartbeat or commit the coordinator refuses ends the run with its error.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use kafka_protocol::{
    messages::{
        consumer_protocol_assignment::TopicPartition,
        join_group_request::JoinGroupRequestProtocol,
        leave_group_request::MemberIdentity,
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        offset_fetch_request::OffsetFetchRequestTopic,
        sync_group_request::SyncGroupRequestAssignment,
        ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest, GroupId,
        HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
        OffsetFetchRequest, SyncGroupRequest, TopicName,
    },
    protocol::{Decodable, Encodable, StrBytes},
    ResponseError,
};

use weir_client::{connection, dialer::Dialer, ClientError};

use crate::{assign::partitions_of, clock::now_ns, control::Control};

/// The client id loadgen's requests carry.
const CLIENT_ID: &str = "loadgen";
const FIND_COORDINATOR_VERSION: i16 = 2;
const JOIN_GROUP_VERSION: i16 = 5;
const SYNC_GROUP_VERSION: i16 = 3;
const HEARTBEAT_VERSION: i16 = 3;
const OFFSET_COMMIT_VERSION: i16 = 7;
const OFFSET_FETCH_VERSION: i16 = 5;
const LEAVE_GROUP_VERSION: i16 = 3;
/// The assignor loadgen names (what Kafka's range assignor is called; loadgen's own
/// assignment is round-robin by sorted member id, which any member can decode).
const ASSIGNOR: &str = "range";
/// How long the coordinator keeps the member without a heartbeat.
const SESSION_TIMEOUT_MS: i32 = 10_000;
/// How long a rebalance may wait for the member to rejoin.
const REBALANCE_TIMEOUT_MS: i32 = 30_000;

/// Why joining, committing or leaving failed.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// A call to the coordinator failed, or it answered with an error.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The consumer protocol's metadata could not be encoded or decoded.
    #[error("{what}: {reason}")]
    Metadata {
        /// What was being encoded or decoded.
        what: &'static str,
        /// kafka-protocol's reason.
        reason: String,
    },
}

/// This run's membership: who it is in the group and what it was assigned.
#[derive(Debug, Clone)]
pub struct Membership {
    /// The group's name.
    pub group: String,
    /// The coordinator's address.
    pub coordinator: String,
    /// The member id the coordinator gave.
    pub member_id: String,
    /// The generation joined.
    pub generation: i32,
    /// Partitions of the topic assigned to this member, ascending.
    pub partitions: Vec<i32>,
    /// How connections to the coordinator are opened (plain or TLS).
    pub dialer: Dialer,
}

fn encoded<T: Encodable>(message: &T, version: i16) -> Result<bytes::Bytes, GroupError> {
    let mut out = bytes::BytesMut::new();
    message
        .encode(&mut out, version)
        .map_err(|e| GroupError::Metadata {
            what: "encoding group metadata",
            reason: e.to_string(),
        })?;
    Ok(out.freeze())
}

/// Joins `group` as a consumer of `topic` (whose partitions are `partitions`), through
/// `bootstrap`.
pub async fn join(
    dialer: &Dialer,
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Result<Membership, GroupError> {
    let coordinator = {
        let (mut writer, mut reader) =
            connection::connect_with(dialer, bootstrap, CLIENT_ID).await?;
        let mut request = FindCoordinatorRequest::default();
        request.key = StrBytes::from_string(group.to_string());
        let response =
            connection::call(&mut writer, &mut reader, &request, FIND_COORDINATOR_VERSION).await?;
        ClientError::check("finding the group coordinator", response.error_code)?;
        format!("{}:{}", response.host.as_str(), response.port)
    };
    let (mut writer, mut reader) =
        connection::connect_with(dialer, &coordinator, CLIENT_ID).await?;
    let topic_name = TopicName(StrBytes::from_string(topic.to_string()));
    let mut subscription = ConsumerProtocolSubscription::default();
    subscription.topics = vec![StrBytes::from_string(topic.to_string())];
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_string()));
    request.session_timeout_ms = SESSION_TIMEOUT_MS;
    request.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
    request.protocol_type = StrBytes::from_static_str("consumer");
    request.protocols = vec![JoinGroupRequestProtocol::default()
        .with_name(StrBytes::from_static_str(ASSIGNOR))
        .with_metadata(encoded(&subscription, 0)?)];
    let mut joined =
        connection::call(&mut writer, &mut reader, &request, JOIN_GROUP_VERSION).await?;
    if joined.error_code == ResponseError::MemberIdRequired.code() {
        request.member_id = joined.member_id.clone();
        joined = connection::call(&mut writer, &mut reader, &request, JOIN_GROUP_VERSION).await?;
    }
    ClientError::check("joining the group", joined.error_code)?;

    let mut sync = SyncGroupRequest::default();
    sync.group_id = request.group_id.clone();
    sync.generation_id = joined.generation_id;
    sync.member_id = joined.member_id.clone();
    if joined.leader == joined.member_id {
        let mut members: Vec<StrBytes> =
            joined.members.iter().map(|m| m.member_id.clone()).collect();
        members.sort();
        for (index, member) in members.iter().enumerate() {
            let mut assignment = ConsumerProtocolAssignment::default();
            assignment.assigned_partitions = vec![TopicPartition::default()
                .with_topic(topic_name.clone())
                .with_partitions(partitions_of(partitions, index, members.len()))];
            sync.assignments.push(
                SyncGroupRequestAssignment::default()
                    .with_member_id(member.clone())
                    .with_assignment(encoded(&assignment, 0)?),
            );
        }
    }
    let synced = connection::call(&mut writer, &mut reader, &sync, SYNC_GROUP_VERSION).await?;
    ClientError::check("syncing the group", synced.error_code)?;
    let mut bytes = synced.assignment.clone();
    let assignment =
        ConsumerProtocolAssignment::decode(&mut bytes, 0).map_err(|e| GroupError::Metadata {
            what: "decoding the assignment",
            reason: e.to_string(),
        })?;
    let mut assigned: Vec<i32> = assignment
        .assigned_partitions
        .iter()
        .filter(|t| t.topic == topic_name)
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    assigned.sort_unstable();
    Ok(Membership {
        group: group.to_string(),
        coordinator,
        member_id: joined.member_id.to_string(),
        generation: joined.generation_id,
        partitions: assigned,
        dialer: dialer.clone(),
    })
}

/// The group's committed offset of each assigned partition that has one.
pub async fn committed(
    membership: &Membership,
    topic: &str,
) -> Result<BTreeMap<i32, i64>, GroupError> {
    let (mut writer, mut reader) =
        connection::connect_with(&membership.dialer, &membership.coordinator, CLIENT_ID).await?;
    let mut request = OffsetFetchRequest::default();
    request.group_id = GroupId(StrBytes::from_string(membership.group.clone()));
    request.topics = Some(vec![OffsetFetchRequestTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
        .with_partition_indexes(membership.partitions.clone())]);
    let response =
        connection::call(&mut writer, &mut reader, &request, OFFSET_FETCH_VERSION).await?;
    ClientError::check("fetching committed offsets", response.error_code)?;
    let mut offsets = BTreeMap::new();
    for partition in response.topics.iter().flat_map(|t| &t.partitions) {
        ClientError::check("fetching a committed offset", partition.error_code)?;
        if partition.committed_offset >= 0 {
            offsets.insert(partition.partition_index, partition.committed_offset);
        }
    }
    Ok(offsets)
}

/// The next offset to read of every partition of the topic (-1: none yet), written by
/// the consumer streams, read by the session to commit.
pub struct Positions(Vec<AtomicI64>);

impl Positions {
    /// Positions for partitions `0..partitions`, starting at `start` where given.
    pub fn new(partitions: usize, start: &BTreeMap<i32, i64>) -> Positions {
        Positions(
            (0..partitions)
                .map(|p| AtomicI64::new(start.get(&(p as i32)).copied().unwrap_or(-1)))
                .collect(),
        )
    }

    /// Records that `partition` has been read up to `next_offset`.
    pub fn advance(&self, partition: i32, next_offset: i64) {
        if let Some(position) = usize::try_from(partition).ok().and_then(|p| self.0.get(p)) {
            position.store(next_offset, Ordering::Relaxed);
        }
    }

    fn get(&self, partition: i32) -> i64 {
        usize::try_from(partition)
            .ok()
            .and_then(|p| self.0.get(p))
            .map_or(-1, |p| p.load(Ordering::Relaxed))
    }
}

/// What the session reports at the end.
#[derive(Debug, Default)]
pub struct SessionStats {
    /// Offset commits the coordinator accepted.
    pub commits: AtomicU64,
    /// Slowest commit round trip, in nanoseconds.
    pub commit_ns_max: AtomicU64,
}

/// Heartbeats and commits every `interval` until `stop` is set, then commits a last
/// time and leaves the group. A refused heartbeat or commit aborts the run.
pub async fn session(
    membership: Membership,
    topic: String,
    positions: Arc<Positions>,
    interval: Duration,
    control: Arc<Control>,
    stop: Arc<AtomicBool>,
    stats: Arc<SessionStats>,
) {
    if let Err(e) = keep(&membership, &topic, &positions, interval, &stop, &stats).await {
        control.note_error("group session", 1);
        control.abort(format!("group {}: {e}", membership.group));
    }
}

async fn keep(
    membership: &Membership,
    topic: &str,
    positions: &Positions,
    interval: Duration,
    stop: &AtomicBool,
    stats: &SessionStats,
) -> Result<(), GroupError> {
    let (mut writer, mut reader) =
        connection::connect_with(&membership.dialer, &membership.coordinator, CLIENT_ID).await?;
    let group = GroupId(StrBytes::from_string(membership.group.clone()));
    let member = StrBytes::from_string(membership.member_id.clone());
    let topic = TopicName(StrBytes::from_string(topic.to_string()));
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    loop {
        let last = stop.load(Ordering::Acquire);
        if !last {
            let mut heartbeat = HeartbeatRequest::default();
            heartbeat.group_id = group.clone();
            heartbeat.generation_id = membership.generation;
            heartbeat.member_id = member.clone();
            let beat =
                connection::call(&mut writer, &mut reader, &heartbeat, HEARTBEAT_VERSION).await?;
            ClientError::check(
                "heartbeat (loadgen does not follow rebalances)",
                beat.error_code,
            )?;
        }
        let partitions: Vec<OffsetCommitRequestPartition> = membership
            .partitions
            .iter()
            .map(|&p| (p, positions.get(p)))
            .filter(|&(p, at)| at >= 0 && committed.get(&p) != Some(&at))
            .map(|(p, at)| {
                OffsetCommitRequestPartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(at)
            })
            .collect();
        if !partitions.is_empty() {
            let mut commit = OffsetCommitRequest::default();
            commit.group_id = group.clone();
            commit.generation_id_or_member_epoch = membership.generation;
            commit.member_id = member.clone();
            commit.topics = vec![OffsetCommitRequestTopic::default()
                .with_name(topic.clone())
                .with_partitions(partitions.clone())];
            let sent = now_ns();
            let response =
                connection::call(&mut writer, &mut reader, &commit, OFFSET_COMMIT_VERSION).await?;
            let took = now_ns().saturating_sub(sent);
            for p in response.topics.iter().flat_map(|t| &t.partitions) {
                ClientError::check("committing offsets", p.error_code)?;
            }
            stats.commits.fetch_add(1, Ordering::Relaxed);
            stats.commit_ns_max.fetch_max(took, Ordering::Relaxed);
            for p in &partitions {
                committed.insert(p.partition_index, p.committed_offset);
            }
        }
        if last {
            break;
        }
        let deadline = now_ns() + interval.as_nanos() as u64;
        while !stop.load(Ordering::Acquire) && now_ns() < deadline {
            glommio::timer::sleep(Duration::from_millis(20)).await;
        }
    }
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = group;
    leave.members = vec![MemberIdentity::default().with_member_id(member)];
    let left = connection::call(&mut writer, &mut reader, &leave, LEAVE_GROUP_VERSION).await?;
    Ok(ClientError::check("leaving the group", left.error_code)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_start_where_given_and_ignore_unknown_partitions() {
        let start = BTreeMap::from([(1, 40)]);
        let positions = Positions::new(3, &start);
        assert_eq!(positions.get(0), -1);
        assert_eq!(positions.get(1), 40);
        positions.advance(2, 7);
        positions.advance(9, 7);
        positions.advance(-1, 7);
        assert_eq!(positions.get(2), 7);
        assert_eq!(positions.get(9), -1);
    }

    #[test]
    fn assignments_round_trip_through_the_consumer_protocol() {
        let topic = TopicName(StrBytes::from_static_str("t"));
        let mut assignment = ConsumerProtocolAssignment::default();
        assignment.assigned_partitions = vec![TopicPartition::default()
            .with_topic(topic.clone())
            .with_partitions(partitions_of(&[0, 1, 2, 3, 4], 1, 2))];
        let mut bytes = encoded(&assignment, 0).expect("encode");
        let decoded = ConsumerProtocolAssignment::decode(&mut bytes, 0).expect("decode");
        assert_eq!(decoded.assigned_partitions[0].topic, topic);
        assert_eq!(decoded.assigned_partitions[0].partitions, vec![1, 3]);
    }
}
