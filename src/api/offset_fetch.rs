//! OffsetFetch: one group (v1–7) or a batch of groups (v8), each answered by its own
//! error code when it is not coordinated here.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic},
        OffsetFetchRequest, OffsetFetchResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    group::offset_store::{CommittedOffset, OffsetStoreError},
    security::acl::Operation,
    shard::context::ShardContext,
};

use super::{authorize::Access, str_bytes, Call, Handler, Reply};

/// Committed offsets of `group`: of the requested partitions (unknown ones as `None`),
/// or of every partition the group committed when `topics` is `None`.
type FetchedOffsets = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

fn lookup(
    ctx: &ShardContext,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Result<FetchedOffsets, OffsetStoreError> {
    let store = ctx.coordinator.store();
    let mut out: FetchedOffsets = Vec::new();
    match topics {
        Some(topics) => {
            for (topic, partitions) in topics {
                let mut found = Vec::with_capacity(partitions.len());
                for p in partitions {
                    let stored = match u32::try_from(p) {
                        Ok(p32) => store.fetch(group, &topic, p32)?,
                        Err(_) => None,
                    };
                    found.push((p, stored));
                }
                out.push((topic, found));
            }
        }
        None => {
            for (topic, p, c) in store.fetch_group(group)? {
                match out.iter_mut().find(|(t, _)| *t == topic) {
                    Some((_, found)) => found.push((p as i32, Some(c))),
                    None => out.push((topic, vec![(p as i32, Some(c))])),
                }
            }
        }
    }
    Ok(out)
}

/// With RequireStable (v7+): the partitions of `group` whose offsets are pending in
/// an open transaction, answered UNSTABLE_OFFSET_COMMIT so the consumer waits for it.
fn unstable(ctx: &ShardContext, group: &str, require_stable: bool) -> Vec<(String, u32)> {
    if !require_stable {
        return Vec::new();
    }
    ctx.coordinator
        .store()
        .pending_partitions(group)
        .unwrap_or_else(|e| {
            tracing::error!(group, error = %e, "pending offsets unreadable");
            Vec::new()
        })
}

/// What OffsetFetch answers for partition `p` of `topic` committed at `stored`: nothing
/// and UNSTABLE_OFFSET_COMMIT while it is among `unstable`, else `stored` and no error.
fn stable_answer(
    unstable: &[(String, u32)],
    topic: &str,
    p: i32,
    stored: Option<CommittedOffset>,
) -> (Option<CommittedOffset>, i16) {
    if unstable.iter().any(|(t, q)| t == topic && *q as i32 == p) {
        (None, ResponseError::UnstableOffsetCommit.code())
    } else {
        (stored, 0)
    }
}

/// Logs (at debug) what OffsetFetch answers for one partition: where a consumer
/// resumes, to be read beside the commits when a fault test finds work done twice.
fn fetched(group: &str, topic: &str, partition: i32, offset: i64, error_code: i16) {
    tracing::debug!(
        group,
        topic,
        partition,
        offset,
        error_code,
        "committed offset fetched"
    );
}

/// OffsetFetch: one group (v1–7) or a batch of groups (v8), each answered by its own
/// error code when it is not coordinated here.
pub struct OffsetFetch;

impl Handler for OffsetFetch {
    type Request = OffsetFetchRequest;
    type Response = OffsetFetchResponse;

    fn errors(r: &OffsetFetchResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
        for t in &r.topics {
            t.partitions.iter().for_each(|p| error(p.error_code));
        }
        for g in &r.groups {
            error(g.error_code);
            for t in &g.topics {
                t.partitions.iter().for_each(|p| error(p.error_code));
            }
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: OffsetFetchRequest,
    ) -> Reply<OffsetFetchResponse> {
        let ctx: &ShardContext = &ctx;
        use kafka_protocol::messages::offset_fetch_response::{
            OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
        };
        let version = call.version();
        let mut response = OffsetFetchResponse::default();
        let access = Access::of(ctx, &call).await;
        let value = |stored: &Option<CommittedOffset>| match stored {
            Some(c) => (c.offset, c.leader_epoch, str_bytes(&c.metadata)),
            None => (-1, -1, StrBytes::default()),
        };
        if version >= 8 {
            for g in &req.groups {
                let mut out = OffsetFetchResponseGroup::default();
                out.group_id = g.group_id.clone();
                let group = g.group_id.0.as_str();
                if !access.group(Operation::Describe, group) {
                    out.error_code = ResponseError::GroupAuthorizationFailed.code();
                    response.groups.push(out);
                    continue;
                }
                if !ctx.owns_group(group) {
                    out.error_code = ResponseError::NotCoordinator.code();
                    response.groups.push(out);
                    continue;
                }
                let wanted = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.0.as_str().to_string(), t.partition_indexes.clone()))
                        .collect()
                });
                let pending = unstable(ctx, group, req.require_stable);
                match lookup(ctx, group, wanted) {
                    Ok(found) => {
                        let found = found
                            .into_iter()
                            .filter(|(t, _)| access.topic(Operation::Describe, t));
                        for (topic, partitions) in found {
                            let mut t = OffsetFetchResponseTopics::default();
                            t.name = super::topic_name(&topic);
                            for (p, committed) in partitions {
                                let mut r = OffsetFetchResponsePartitions::default();
                                r.partition_index = p;
                                let stored;
                                (stored, r.error_code) =
                                    stable_answer(&pending, &topic, p, committed);
                                let (offset, epoch, metadata) = value(&stored);
                                fetched(group, &topic, p, offset, r.error_code);
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
            return Reply::Respond(response);
        }
        let group = req.group_id.0.as_str();
        if !access.group(Operation::Describe, group) {
            response.error_code = ResponseError::GroupAuthorizationFailed.code();
            return Reply::Respond(response);
        }
        if !ctx.owns_group(group) {
            if version >= 2 {
                response.error_code = ResponseError::NotCoordinator.code();
            }
            return Reply::Respond(response);
        }
        let wanted = req.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.name.0.as_str().to_string(), t.partition_indexes.clone()))
                .collect()
        });
        let pending = unstable(ctx, group, version >= 7 && req.require_stable);
        match lookup(ctx, group, wanted) {
            Ok(found) => {
                let found = found
                    .into_iter()
                    .filter(|(t, _)| access.topic(Operation::Describe, t));
                for (topic, partitions) in found {
                    let mut t = OffsetFetchResponseTopic::default();
                    t.name = super::topic_name(&topic);
                    for (p, committed) in partitions {
                        let mut r = OffsetFetchResponsePartition::default();
                        r.partition_index = p;
                        let stored;
                        (stored, r.error_code) = stable_answer(&pending, &topic, p, committed);
                        let (offset, epoch, metadata) = value(&stored);
                        fetched(group, &topic, p, offset, r.error_code);
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
        Reply::Respond(response)
    }
}
