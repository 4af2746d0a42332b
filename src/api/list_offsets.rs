//! ListOffsets: earliest, latest, max-timestamp and by-timestamp offsets per partition.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse},
        ListOffsetsRequest, ListOffsetsResponse,
    },
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext, storage::TimestampQuery};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

/// Answers each partition's offset query.
pub struct ListOffsets;

impl Handler for ListOffsets {
    type Request = ListOffsetsRequest;
    type Response = ListOffsetsResponse;

    fn errors(r: &ListOffsetsResponse, error: &mut dyn FnMut(i16)) {
        for t in &r.topics {
            t.partitions.iter().for_each(|p| error(p.error_code));
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: ListOffsetsRequest,
    ) -> Reply<ListOffsetsResponse> {
        let ctx: &ShardContext = &ctx;
        let mut response = ListOffsetsResponse::default();
        let access = Access::of(ctx, &call).await;
        for topic in &req.topics {
            let mut t = ListOffsetsTopicResponse::default();
            t.name = topic.name.clone();
            let allowed = access.topic(Operation::Describe, topic.name.0.as_str());
            for partition in &topic.partitions {
                let mut r = ListOffsetsPartitionResponse::default();
                r.partition_index = partition.partition_index;
                r.timestamp = -1;
                r.offset = -1;
                if !allowed {
                    r.error_code = ResponseError::TopicAuthorizationFailed.code();
                    t.partitions.push(r);
                    continue;
                }
                let query = match partition.timestamp {
                    -2 => Some(TimestampQuery::Earliest),
                    -1 => Some(TimestampQuery::Latest),
                    -3 => Some(TimestampQuery::MaxTimestamp),
                    ts if ts >= 0 => Some(TimestampQuery::At(ts)),
                    _ => None,
                };
                match (
                    query,
                    ctx.partition(topic.name.0.as_str(), partition.partition_index)
                        .await,
                ) {
                    (None, _) => r.error_code = ResponseError::InvalidRequest.code(),
                    (_, Err(e)) => r.error_code = e.code(),
                    // READ_COMMITTED's latest offset is the last stable offset (v2+).
                    (Some(TimestampQuery::Latest), Ok(log))
                        if call.version() >= 2 && req.isolation_level == 1 =>
                    {
                        r.offset = log.last_stable_offset().to_wire();
                        if call.version() >= 4 {
                            r.leader_epoch = 0;
                        }
                    }
                    (Some(q), Ok(log)) => match log.offset_for_timestamp(q).await {
                        Ok(Some(found)) => {
                            r.offset = found.offset.to_wire();
                            r.timestamp = found.timestamp;
                            if call.version() >= 4 {
                                r.leader_epoch = 0;
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "offset lookup failed");
                            r.error_code = e.code();
                        }
                    },
                }
                t.partitions.push(r);
            }
            response.topics.push(t);
        }
        Reply::Respond(response)
    }
}
