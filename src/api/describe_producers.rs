//! DescribeProducers (v0): the producers a partition leader knows — id, epoch, last
//! sequence and timestamp, and where an open transaction of theirs begins — which
//! `kafka-transactions.sh find-hanging` and `abort` read. READ on the topic.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        describe_producers_response::{PartitionResponse, ProducerState, TopicResponse},
        DescribeProducersRequest, DescribeProducersResponse, ProducerId,
    },
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

/// DescribeProducers.
pub struct DescribeProducers;

impl Handler for DescribeProducers {
    type Request = DescribeProducersRequest;
    type Response = DescribeProducersResponse;

    fn errors(r: &DescribeProducersResponse, error: &mut dyn FnMut(i16)) {
        for t in &r.topics {
            t.partitions.iter().for_each(|p| error(p.error_code));
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: DescribeProducersRequest,
    ) -> Reply<DescribeProducersResponse> {
        let access = Access::of(&ctx, &call).await;
        let mut response = DescribeProducersResponse::default();
        for topic in &req.topics {
            let name = topic.name.0.as_str();
            let mut t = TopicResponse::default();
            t.name = topic.name.clone();
            for &p in &topic.partition_indexes {
                let mut r = PartitionResponse::default();
                r.partition_index = p;
                let log = if access.topic(Operation::Read, name) {
                    ctx.partition(name, p).await.map_err(|e| e.kafka_error())
                } else {
                    Err(ResponseError::TopicAuthorizationFailed)
                };
                match log {
                    Ok(log) => {
                        for producer in log.producers() {
                            let mut s = ProducerState::default();
                            s.producer_id = ProducerId(producer.id);
                            s.producer_epoch = i32::from(producer.epoch);
                            s.last_sequence = producer.last_sequence;
                            s.last_timestamp = producer.last_timestamp;
                            s.coordinator_epoch = -1;
                            s.current_txn_start_offset =
                                producer.txn_start.map_or(-1, |o| o.to_wire());
                            r.active_producers.push(s);
                        }
                    }
                    Err(e) => r.error_code = e.code(),
                }
                t.partitions.push(r);
            }
            response.topics.push(t);
        }
        Reply::Respond(response)
    }
}
