//! OffsetCommit, answered once durable: on a cluster, once the commit is in the group's
//! offsets journal partition on every in-sync replica (`group::journal`).

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
        OffsetCommitRequest, OffsetCommitResponse,
    },
    ResponseError,
};

use crate::{
    group::offset_store::CommittedOffset, security::acl::Operation, shard::context::ShardContext,
};

use super::{authorize::Access, error_code::code_of, Call, Handler, Reply};

/// OffsetCommit, answered once durable.
pub struct OffsetCommit;

impl Handler for OffsetCommit {
    type Request = OffsetCommitRequest;
    type Response = OffsetCommitResponse;

    fn errors(r: &OffsetCommitResponse, error: &mut dyn FnMut(i16)) {
        for t in &r.topics {
            t.partitions.iter().for_each(|p| error(p.error_code));
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: OffsetCommitRequest,
    ) -> Reply<OffsetCommitResponse> {
        let ctx: &ShardContext = &ctx;
        let _version = call.version();
        let group = req.group_id.0.as_str();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut offsets = Vec::new();
        let mut invalid = Vec::new();
        let mut refused = Vec::new();
        let access = Access::of(ctx, &call).await;
        let group_allowed = access.group(Operation::Read, group);
        for topic in &req.topics {
            let topic_allowed = access.topic(Operation::Read, topic.name.0.as_str());
            for p in &topic.partitions {
                if !group_allowed || !topic_allowed {
                    let error = if group_allowed {
                        ResponseError::TopicAuthorizationFailed
                    } else {
                        ResponseError::GroupAuthorizationFailed
                    };
                    refused.push((topic.name.clone(), p.partition_index, error));
                    continue;
                }
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
        let codes = match ctx.coordinating(group).await {
            Ok(journal) => {
                ctx.coordinator
                    .commit(
                        group,
                        req.generation_id_or_member_epoch,
                        req.member_id.as_str(),
                        req.group_instance_id.as_ref().map(|i| i.as_str()),
                        offsets.clone(),
                        journal,
                    )
                    .await
            }
            Err(e) => vec![Err(e); offsets.len()],
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
            push(topic, *partition as i32, code_of(&code));
        }
        for (topic, partition, error) in refused {
            push(topic.0.as_str(), partition, error.code());
        }
        for (topic, partition) in invalid {
            push(
                topic.0.as_str(),
                partition,
                ResponseError::InvalidCommitOffsetSize.code(),
            );
        }
        Reply::Respond(response)
    }
}
