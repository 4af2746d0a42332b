//! OffsetForLeaderEpoch: where a leader epoch ends, so a client (after a leader change)
//! or a follower can tell whether its log diverged: the largest epoch at or below the
//! one asked about, and the offset where the next epoch begins — for the current epoch,
//! the log end offset, to a consumer as to a replica, as Kafka answers. Not the high
//! watermark: a new leader's lags the one its predecessor served until its followers
//! fetch again, and a consumer whose position was below the old one would take the
//! lower answer for a truncation and read its last records again (inside a transaction
//! of Kafka Streams, processing them twice). An epoch older than every epoch in the log
//! is answered with Kafka's undefined epoch and offset (-1).

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult},
        OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    },
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

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
        call: Call,
        req: OffsetForLeaderEpochRequest,
    ) -> Reply<OffsetForLeaderEpochResponse> {
        let consumer = req.replica_id.0 < 0;
        let mut response = OffsetForLeaderEpochResponse::default();
        let access = Access::of(&ctx, &call).await;
        for topic in &req.topics {
            let mut t = OffsetForLeaderTopicResult::default();
            t.topic = topic.topic.clone();
            let name = topic.topic.0.as_str();
            // Consumers need DESCRIBE on the topic, followers CLUSTER_ACTION.
            let refused = if consumer {
                (!access.topic(Operation::Describe, name))
                    .then_some(ResponseError::TopicAuthorizationFailed)
            } else {
                (!access.cluster(Operation::ClusterAction))
                    .then_some(ResponseError::ClusterAuthorizationFailed)
            };
            for p in &topic.partitions {
                let mut e = EpochEndOffset::default();
                e.partition = p.partition;
                e.leader_epoch = -1;
                e.end_offset = -1;
                if let Some(refusal) = refused {
                    e.error_code = refusal.code();
                    t.partitions.push(e);
                    continue;
                }
                let current = ctx
                    .leadership(name, p.partition as u32)
                    .map_or(0, |l| l.epoch);
                match ctx.partition(name, p.partition).await {
                    Err(err) => e.error_code = err.code(),
                    Ok(_) if p.current_leader_epoch > current => {
                        e.error_code = ResponseError::UnknownLeaderEpoch.code()
                    }
                    Ok(_) if p.current_leader_epoch >= 0 && p.current_leader_epoch < current => {
                        e.error_code = ResponseError::FencedLeaderEpoch.code()
                    }
                    Ok(log) => {
                        if let Some(end) = log.epoch_end(p.leader_epoch) {
                            e.leader_epoch = end.epoch;
                            e.end_offset = end.end_offset.to_wire();
                        } else if log.leader_epochs().latest().is_none() && p.leader_epoch >= 0 {
                            // Nothing stored yet: the current epoch ends at the log end.
                            e.leader_epoch = current;
                            e.end_offset = log.offsets().log_end.to_wire();
                        }
                    }
                }
                t.partitions.push(e);
            }
            response.topics.push(t);
        }
        Reply::Respond(response)
    }
}
