//! DeleteRecords: moves partitions' log start offsets forward (the admin clients'
//! `delete records before offset`). An offset of -1 means the high watermark, as in Kafka.
//! Fetches below the new start get OFFSET_OUT_OF_RANGE; segments wholly below it are
//! deleted.

use std::rc::Rc;

use kafka_protocol::messages::{
    delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult},
    DeleteRecordsRequest, DeleteRecordsResponse,
};

use crate::{security::acl::Operation, shard::context::ShardContext, storage::Offset};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

/// Kafka's "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

/// Moves each partition's log start, each answered with its own error or low watermark.
pub struct DeleteRecords;

impl Handler for DeleteRecords {
    type Request = DeleteRecordsRequest;
    type Response = DeleteRecordsResponse;

    fn errors(r: &DeleteRecordsResponse, error: &mut dyn FnMut(i16)) {
        for t in &r.topics {
            t.partitions.iter().for_each(|p| error(p.error_code));
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: DeleteRecordsRequest,
    ) -> Reply<DeleteRecordsResponse> {
        let mut response = DeleteRecordsResponse::default();
        let access = Access::of(&ctx, &call).await;
        for topic in &req.topics {
            let mut t = DeleteRecordsTopicResult::default();
            t.name = topic.name.clone();
            let allowed = access.topic(Operation::Delete, topic.name.0.as_str());
            for p in &topic.partitions {
                let mut r = DeleteRecordsPartitionResult::default();
                r.partition_index = p.partition_index;
                r.low_watermark = -1;
                if !allowed {
                    r.error_code = kafka_protocol::ResponseError::TopicAuthorizationFailed.code();
                    t.partitions.push(r);
                    continue;
                }
                match ctx
                    .partition(topic.name.0.as_str(), p.partition_index)
                    .await
                {
                    Err(e) => r.error_code = e.code(),
                    Ok(log) => {
                        let before = match p.offset {
                            HIGH_WATERMARK => Some(log.high_watermark()),
                            o => u64::try_from(o).ok().map(Offset),
                        };
                        match before {
                            None => {
                                r.error_code =
                                    kafka_protocol::ResponseError::OffsetOutOfRange.code()
                            }
                            Some(before) => match log.delete_records(before).await {
                                Ok(start) => {
                                    tracing::info!(topic = %topic.name.0.as_str(), partition = p.partition_index, log_start = start.0, "deleted records");
                                    r.low_watermark = start.to_wire();
                                }
                                Err(e) => r.error_code = e.code(),
                            },
                        }
                    }
                }
                t.partitions.push(r);
            }
            response.topics.push(t);
        }
        Reply::Respond(response)
    }
}
