//! The consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, OffsetCommit and OffsetFetch. A group lives on the shard placement gives
//! it; a group request sent to another shard gets NOT_COORDINATOR, and the client asks
//! FindCoordinator again.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        find_coordinator_response::Coordinator as CoordinatorEntry,
        join_group_response::JoinGroupResponseMember,
        leave_group_response::MemberResponse,
        offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
        offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic},
        BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest,
        HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
        LeaveGroupResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
        OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    group::{coordinator::JoinRequest, offset_store::CommittedOffset},
    metadata::placement::{group_shard, ShardId},
    shard::{context::ShardContext, shard_addr},
};

use super::{decode_body, encode, Request};

fn owns(ctx: &ShardContext, group: &str) -> bool {
    group_shard(group, ctx.config.shards) == ctx.id
}

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// FindCoordinator: the shard that owns the group, for one key or a batch (v4+).
pub fn find_coordinator(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    let req: FindCoordinatorRequest = decode_body(request)?;
    let version = request.version();
    let locate = |key: &str| {
        let shard = group_shard(key, ctx.config.shards);
        let port = i32::from(shard_addr(&ctx.config, ShardId(shard.0)).port());
        (BrokerId(shard.0 as i32), s(&ctx.config.advertise), port)
    };
    // Only groups (key type 0) are coordinated; transactions are not supported.
    let refused = req.key_type != 0;
    let mut response = FindCoordinatorResponse::default();
    if version >= 4 {
        for key in &req.coordinator_keys {
            let mut c = CoordinatorEntry::default();
            c.key = key.clone();
            if refused {
                c.error_code = ResponseError::CoordinatorNotAvailable.code();
                c.node_id = BrokerId(-1);
                c.port = -1;
            } else {
                let (node, host, port) = locate(key.as_str());
                c.node_id = node;
                c.host = host;
                c.port = port;
            }
            response.coordinators.push(c);
        }
    } else if refused {
        response.error_code = ResponseError::CoordinatorNotAvailable.code();
        response.node_id = BrokerId(-1);
        response.port = -1;
    } else {
        let (node, host, port) = locate(req.key.as_str());
        response.node_id = node;
        response.host = host;
        response.port = port;
    }
    encode(request, version, &response)
}

/// JoinGroup.
pub async fn join_group(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    let req: JoinGroupRequest = decode_body(request)?;
    let version = request.version();
    let group = req.group_id.0.as_str().to_string();
    let mut response = JoinGroupResponse::default();
    if !owns(ctx, &group) {
        response.error_code = ResponseError::NotCoordinator.code();
        response.generation_id = -1;
        return encode(request, version, &response);
    }
    let session = Duration::from_millis(req.session_timeout_ms.max(0) as u64);
    let rebalance = if version >= 1 {
        Duration::from_millis(req.rebalance_timeout_ms.max(0) as u64)
    } else {
        session
    };
    let result = ctx
        .coordinator
        .join(JoinRequest {
            group,
            member_id: req.member_id.as_str().to_string(),
            group_instance_id: req
                .group_instance_id
                .as_ref()
                .map(|i| i.as_str().to_string()),
            client_id: request
                .header
                .client_id
                .as_ref()
                .map_or("client".to_string(), |c| c.as_str().to_string()),
            session_timeout: session,
            rebalance_timeout: rebalance,
            protocol_type: req.protocol_type.as_str().to_string(),
            protocols: req
                .protocols
                .iter()
                .map(|p| (p.name.as_str().to_string(), p.metadata.clone()))
                .collect(),
            require_known_member_id: version >= 4,
        })
        .await;
    response.error_code = result.error;
    response.generation_id = result.generation;
    response.member_id = s(&result.member_id);
    response.leader = s(&result.leader);
    if version >= 7 {
        response.protocol_type = result.protocol_type.as_deref().map(s);
    }
    response.protocol_name = result.protocol_name.as_deref().map(s);
    if version < 7 && response.protocol_name.is_none() {
        response.protocol_name = Some(StrBytes::default());
    }
    response.members = result
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let mut m = JoinGroupResponseMember::default();
            m.member_id = s(&id);
            if version >= 5 {
                m.group_instance_id = instance.as_deref().map(s);
            }
            m.metadata = metadata;
            m
        })
        .collect();
    encode(request, version, &response)
}

/// SyncGroup.
pub async fn sync_group(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    let req: SyncGroupRequest = decode_body(request)?;
    let version = request.version();
    let group = req.group_id.0.as_str();
    let mut response = SyncGroupResponse::default();
    if !owns(ctx, group) {
        response.error_code = ResponseError::NotCoordinator.code();
        return encode(request, version, &response);
    }
    let assignments = req
        .assignments
        .iter()
        .map(|a| (a.member_id.as_str().to_string(), a.assignment.clone()))
        .collect();
    let result = ctx
        .coordinator
        .sync(
            group,
            req.generation_id,
            req.member_id.as_str(),
            req.group_instance_id.as_ref().map(|i| i.as_str()),
            assignments,
        )
        .await;
    response.error_code = result.error;
    response.assignment = result.assignment;
    if version >= 5 {
        response.protocol_type = result.protocol_type.as_deref().map(s);
        response.protocol_name = result.protocol_name.as_deref().map(s);
    }
    encode(request, version, &response)
}

/// Heartbeat.
pub fn heartbeat(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    let req: HeartbeatRequest = decode_body(request)?;
    let group = req.group_id.0.as_str();
    let mut response = HeartbeatResponse::default();
    response.error_code = if owns(ctx, group) {
        ctx.coordinator.heartbeat(
            group,
            req.generation_id,
            req.member_id.as_str(),
            req.group_instance_id.as_ref().map(|i| i.as_str()),
        )
    } else {
        ResponseError::NotCoordinator.code()
    };
    encode(request, request.version(), &response)
}

/// LeaveGroup, for one member (v0–2) or several (v3+).
pub fn leave_group(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    let req: LeaveGroupRequest = decode_body(request)?;
    let version = request.version();
    let group = req.group_id.0.as_str();
    let mut response = LeaveGroupResponse::default();
    if !owns(ctx, group) {
        response.error_code = ResponseError::NotCoordinator.code();
        return encode(request, version, &response);
    }
    if version >= 3 {
        let ids: Vec<String> = req
            .members
            .iter()
            .map(|m| m.member_id.as_str().to_string())
            .collect();
        let codes = ctx.coordinator.leave(group, &ids);
        response.members = req
            .members
            .iter()
            .zip(codes)
            .map(|(m, code)| {
                let mut r = MemberResponse::default();
                r.member_id = m.member_id.clone();
                r.group_instance_id = m.group_instance_id.clone();
                r.error_code = code;
                r
            })
            .collect();
    } else {
        response.error_code = ctx
            .coordinator
            .leave(group, &[req.member_id.as_str().to_string()])[0];
    }
    encode(request, version, &response)
}

/// OffsetCommit, answered once durable.
pub async fn offset_commit(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    let req: OffsetCommitRequest = decode_body(request)?;
    let version = request.version();
    let group = req.group_id.0.as_str();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut offsets = Vec::new();
    let mut invalid = Vec::new();
    for topic in &req.topics {
        for p in &topic.partitions {
            match u32::try_from(p.partition_index) {
                Ok(partition) if p.committed_offset >= 0 => offsets.push((
                    topic.name.0.as_str().to_string(),
                    partition,
                    CommittedOffset {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        generation: req.generation_id_or_member_epoch,
                        committed_at_ms: now_ms,
                        metadata: p
                            .committed_metadata
                            .as_ref()
                            .map_or(String::new(), |m| m.as_str().to_string()),
                    },
                )),
                _ => invalid.push((topic.name.clone(), p.partition_index)),
            }
        }
    }
    let codes = if owns(ctx, group) {
        ctx.coordinator
            .commit(
                group,
                req.generation_id_or_member_epoch,
                req.member_id.as_str(),
                req.group_instance_id.as_ref().map(|i| i.as_str()),
                offsets.clone(),
            )
            .await
    } else {
        vec![ResponseError::NotCoordinator.code(); offsets.len()]
    };
    let mut response = OffsetCommitResponse::default();
    let mut push = |name: &str, partition: i32, code: i16| {
        let mut r = OffsetCommitResponsePartition::default();
        r.partition_index = partition;
        r.error_code = code;
        match response
            .topics
            .iter_mut()
            .find(|t| t.name.0.as_str() == name)
        {
            Some(t) => t.partitions.push(r),
            None => {
                let mut t = OffsetCommitResponseTopic::default();
                t.name = super::topic_name(name);
                t.partitions.push(r);
                response.topics.push(t);
            }
        }
    };
    for ((topic, partition, _), code) in offsets.iter().zip(codes) {
        push(topic, *partition as i32, code);
    }
    for (topic, partition) in invalid {
        push(
            topic.0.as_str(),
            partition,
            ResponseError::InvalidCommitOffsetSize.code(),
        );
    }
    encode(request, version, &response)
}

/// Committed offsets of `group`: of the requested partitions (unknown ones as `None`),
/// or of every partition the group committed when `topics` is `None`.
type FetchedOffsets = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

fn lookup(
    ctx: &ShardContext,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Result<FetchedOffsets, String> {
    let store = ctx.coordinator.store();
    let mut out: FetchedOffsets = Vec::new();
    match topics {
        Some(topics) => {
            for (topic, partitions) in topics {
                let mut found = Vec::with_capacity(partitions.len());
                for p in partitions {
                    let stored = match u32::try_from(p) {
                        Ok(p32) => store.fetch(group, &topic, p32).map_err(|e| e.to_string())?,
                        Err(_) => None,
                    };
                    found.push((p, stored));
                }
                out.push((topic, found));
            }
        }
        None => {
            for (topic, p, c) in store.fetch_group(group).map_err(|e| e.to_string())? {
                match out.iter_mut().find(|(t, _)| *t == topic) {
                    Some((_, found)) => found.push((p as i32, Some(c))),
                    None => out.push((topic, vec![(p as i32, Some(c))])),
                }
            }
        }
    }
    Ok(out)
}

/// OffsetFetch: one group (v1–7) or a batch of groups (v8), each answered by its own
/// error code when it is not coordinated here.
pub async fn offset_fetch(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
    };
    let req: OffsetFetchRequest = decode_body(request)?;
    let version = request.version();
    let mut response = OffsetFetchResponse::default();
    let value = |stored: &Option<CommittedOffset>| match stored {
        Some(c) => (c.offset, c.leader_epoch, s(&c.metadata)),
        None => (-1, -1, StrBytes::default()),
    };
    if version >= 8 {
        for g in &req.groups {
            let mut out = OffsetFetchResponseGroup::default();
            out.group_id = g.group_id.clone();
            let group = g.group_id.0.as_str();
            if !owns(ctx, group) {
                out.error_code = ResponseError::NotCoordinator.code();
                response.groups.push(out);
                continue;
            }
            let wanted = g.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.0.as_str().to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            match lookup(ctx, group, wanted) {
                Ok(found) => {
                    for (topic, partitions) in found {
                        let mut t = OffsetFetchResponseTopics::default();
                        t.name = super::topic_name(&topic);
                        for (p, stored) in partitions {
                            let (offset, epoch, metadata) = value(&stored);
                            let mut r = OffsetFetchResponsePartitions::default();
                            r.partition_index = p;
                            r.committed_offset = offset;
                            r.committed_leader_epoch = epoch;
                            r.metadata = Some(metadata);
                            t.partitions.push(r);
                        }
                        out.topics.push(t);
                    }
                }
                Err(e) => {
                    tracing::error!(group, error = %e, "offset fetch failed");
                    out.error_code = ResponseError::KafkaStorageError.code();
                }
            }
            response.groups.push(out);
        }
        return encode(request, version, &response);
    }
    let group = req.group_id.0.as_str();
    if !owns(ctx, group) {
        if version >= 2 {
            response.error_code = ResponseError::NotCoordinator.code();
        }
        return encode(request, version, &response);
    }
    let wanted = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.as_str().to_string(), t.partition_indexes.clone()))
            .collect()
    });
    match lookup(ctx, group, wanted) {
        Ok(found) => {
            for (topic, partitions) in found {
                let mut t = OffsetFetchResponseTopic::default();
                t.name = super::topic_name(&topic);
                for (p, stored) in partitions {
                    let (offset, epoch, metadata) = value(&stored);
                    let mut r = OffsetFetchResponsePartition::default();
                    r.partition_index = p;
                    r.committed_offset = offset;
                    if version >= 5 {
                        r.committed_leader_epoch = epoch;
                    }
                    r.metadata = Some(metadata);
                    t.partitions.push(r);
                }
                response.topics.push(t);
            }
        }
        Err(e) => {
            tracing::error!(group, error = %e, "offset fetch failed");
            if version >= 2 {
                response.error_code = ResponseError::KafkaStorageError.code();
            }
        }
    }
    encode(request, version, &response)
}

/// ListGroups: the groups this shard coordinates (members or committed offsets).
pub fn list_groups(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    use kafka_protocol::messages::{
        list_groups_response::ListedGroup, GroupId, ListGroupsRequest, ListGroupsResponse,
    };
    let req: ListGroupsRequest = decode_body(request)?;
    let version = request.version();
    let mut response = ListGroupsResponse::default();
    let with_offsets = match ctx.coordinator.store().groups() {
        Ok(all) => all.into_iter().filter(|g| owns(ctx, g)).collect(),
        Err(e) => {
            tracing::error!(error = %e, "listing groups failed");
            response.error_code = ResponseError::KafkaStorageError.code();
            Vec::new()
        }
    };
    for (id, protocol_type, state) in ctx.coordinator.list(with_offsets) {
        if !req.states_filter.is_empty()
            && !req
                .states_filter
                .iter()
                .any(|f| f.as_str() == state.kafka_name())
        {
            continue;
        }
        let mut g = ListedGroup::default();
        g.group_id = GroupId(s(&id));
        g.protocol_type = s(&protocol_type);
        if version >= 4 {
            g.group_state = StrBytes::from_static_str(state.kafka_name());
        }
        if version >= 5 {
            g.group_type = StrBytes::from_static_str("classic");
        }
        response.groups.push(g);
    }
    encode(request, version, &response)
}

/// DescribeGroups: state, protocol and members of each group.
pub fn describe_groups(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    use kafka_protocol::messages::{
        describe_groups_response::{DescribedGroup, DescribedGroupMember},
        DescribeGroupsRequest, DescribeGroupsResponse,
    };
    let req: DescribeGroupsRequest = decode_body(request)?;
    let version = request.version();
    let mut response = DescribeGroupsResponse::default();
    for group in &req.groups {
        let mut d = DescribedGroup::default();
        d.group_id = group.clone();
        if !owns(ctx, group.0.as_str()) {
            d.error_code = ResponseError::NotCoordinator.code();
        } else {
            match ctx.coordinator.members(group.0.as_str()) {
                None => {
                    d.group_state =
                        StrBytes::from_static_str(if version >= 6 { "Dead" } else { "Empty" })
                }
                Some((state, protocol_type, protocol, members)) => {
                    d.group_state = StrBytes::from_static_str(state.kafka_name());
                    d.protocol_type = s(&protocol_type);
                    d.protocol_data = s(&protocol);
                    d.members = members
                        .into_iter()
                        .map(|(id, instance, client_id, metadata, assignment)| {
                            let mut m = DescribedGroupMember::default();
                            m.member_id = s(&id);
                            if version >= 4 {
                                m.group_instance_id = instance.as_deref().map(s);
                            }
                            m.client_id = s(&client_id);
                            m.client_host = StrBytes::from_static_str("/127.0.0.1");
                            m.member_metadata = metadata;
                            m.member_assignment = assignment;
                            m
                        })
                        .collect();
                }
            }
        }
        response.groups.push(d);
    }
    encode(request, version, &response)
}

/// DeleteGroups: removes empty groups and their committed offsets.
pub async fn delete_groups(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    use kafka_protocol::messages::{
        delete_groups_response::DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse,
    };
    let req: DeleteGroupsRequest = decode_body(request)?;
    let mut response = DeleteGroupsResponse::default();
    for group in &req.groups_names {
        let mut r = DeletableGroupResult::default();
        r.group_id = group.clone();
        r.error_code = if owns(ctx, group.0.as_str()) {
            ctx.coordinator.delete(group.0.as_str()).await
        } else {
            ResponseError::NotCoordinator.code()
        };
        response.results.push(r);
    }
    encode(request, request.version(), &response)
}
