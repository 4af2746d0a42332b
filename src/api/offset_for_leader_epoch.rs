//! OffsetForLeaderEpoch: where a leader epoch ends, so a client (after a leader change)
//! or a follower can tell whether its log diverged. On one host every batch is stamped
//! with leader epoch 0 and no epoch ever ends: epoch 0 ends at the log's end — the high
//! watermark for a consumer, which never sees past it, the log end offset for a replica.
//! An epoch weir has not had is answered with Kafka's undefined epoch and offset (-1).

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult},
        OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    },
    ResponseError,
};

use crate::shard::context::ShardContext;

use super::{error_code::KafkaError, Call, Handler, Reply};

/// The leader epoch every batch on one host carries.
const LEADER_EPOCH: i32 = 0;

/// Answers each partition's epoch query.
pub struct OffsetForLeaderEpoch;

impl Handler for OffsetForLeaderEpoch {
    type Request = OffsetForLeaderEpochRequest;
    type Response = OffsetForLeaderEpochResponse;

    fn errors(r: &OffsetForLeaderEpochResponse, error: &mut dyn FnMut(i16)) {
        for t in &r.topics {
            t.partitions.iter().for_each(|p| error(p.error_code));
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        _call: Call,
        req: OffsetForLeaderEpochRequest,
    ) -> Reply<OffsetForLeaderEpochResponse> {
        let consumer = req.replica_id.0 < 0;
        let mut response = OffsetForLeaderEpochResponse::default();
        for topic in &req.topics {
            let mut t = OffsetForLeaderTopicResult::default();
            t.topic = topic.topic.clone();
            for p in &topic.partitions {
                let mut e = EpochEndOffset::default();
                e.partition = p.partition;
                e.leader_epoch = -1;
                e.end_offset = -1;
                match ctx.partition(topic.topic.0.as_str(), p.partition).await {
                    Err(err) => e.error_code = err.code(),
                    // The client knows a newer leader than this one. (An older current
                    // epoch, FENCED_LEADER_EPOCH, cannot exist on one host.)
                    Ok(_) if p.current_leader_epoch > LEADER_EPOCH => {
                        e.error_code = ResponseError::UnknownLeaderEpoch.code()
                    }
                    Ok(log) if p.leader_epoch == LEADER_EPOCH => {
                        let offsets = log.offsets();
                        e.leader_epoch = LEADER_EPOCH;
                        e.end_offset = if consumer {
                            offsets.high_watermark.to_wire()
                        } else {
                            offsets.log_end.to_wire()
                        };
                    }
                    Ok(_) => {}
                }
                t.partitions.push(e);
            }
            response.topics.push(t);
        }
        Reply::Respond(response)
    }
}
