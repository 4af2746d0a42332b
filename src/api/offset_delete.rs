//! OffsetDelete: removes a group's committed offsets of some partitions (the admin
//! clients' `delete consumer group offsets`), refused per partition while the group's
//! members consume the topic.

use std::rc::Rc;

use kafka_protocol::messages::{
    offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic},
    OffsetDeleteRequest, OffsetDeleteResponse,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, error_code::code_of, Call, Handler, Reply};

/// Deletes the requested offsets on the group's coordinator.
pub struct OffsetDelete;

impl Handler for OffsetDelete {
    type Request = OffsetDeleteRequest;
    type Response = OffsetDeleteResponse;

    fn errors(r: &OffsetDeleteResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
        for t in &r.topics {
            t.partitions.iter().for_each(|p| error(p.error_code));
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: OffsetDeleteRequest,
    ) -> Reply<OffsetDeleteResponse> {
        let mut response = OffsetDeleteResponse::default();
        let group = req.group_id.0.as_str();
        // DELETE on the group; READ on each topic whose offsets go (Kafka's rule).
        let access = Access::of(&ctx, &call).await;
        if !access.group(Operation::Delete, group) {
            response.error_code = kafka_protocol::ResponseError::GroupAuthorizationFailed.code();
            return Reply::Respond(response);
        }
        let journal = match ctx.coordinating(group).await {
            Ok(journal) => journal,
            Err(e) => {
                response.error_code = e.code();
                return Reply::Respond(response);
            }
        };
        // Negative partition indexes name nothing stored: answered as deleted.
        let readable = |name: &str| access.topic(Operation::Read, name);
        let wanted: Vec<(String, u32)> = req
            .topics
            .iter()
            .filter(|t| readable(t.name.0.as_str()))
            .flat_map(|t| {
                t.partitions.iter().filter_map(|p| {
                    u32::try_from(p.partition_index)
                        .ok()
                        .map(|i| (t.name.0.as_str().to_string(), i))
                })
            })
            .collect();
        match ctx
            .coordinator
            .delete_offsets(group, wanted.clone(), journal)
            .await
        {
            Err(e) => response.error_code = e.code(),
            Ok(outcomes) => {
                let mut outcome = wanted.iter().zip(&outcomes);
                for topic in &req.topics {
                    let mut t = OffsetDeleteResponseTopic::default();
                    t.name = topic.name.clone();
                    let allowed = readable(topic.name.0.as_str());
                    for p in &topic.partitions {
                        let mut r = OffsetDeleteResponsePartition::default();
                        r.partition_index = p.partition_index;
                        if !allowed {
                            r.error_code =
                                kafka_protocol::ResponseError::TopicAuthorizationFailed.code();
                        } else if p.partition_index >= 0 {
                            r.error_code = outcome.next().map_or(0, |(_, o)| code_of(o));
                        }
                        t.partitions.push(r);
                    }
                    response.topics.push(t);
                }
            }
        }
        Reply::Respond(response)
    }
}
