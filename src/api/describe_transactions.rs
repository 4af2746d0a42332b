//! DescribeTransactions (v0): the state of transactional ids this shard coordinates —
//! state, timeout, start time, producer id and epoch, and the partitions of the open
//! transaction — as `kafka-transactions.sh describe` and `weir transactions describe`
//! show it. DESCRIBE on the transactional id.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        describe_transactions_response::{TopicData, TransactionState},
        DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId,
    },
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, str_bytes, Call, Handler, Reply};

/// DescribeTransactions.
pub struct DescribeTransactions;

impl Handler for DescribeTransactions {
    type Request = DescribeTransactionsRequest;
    type Response = DescribeTransactionsResponse;

    fn errors(r: &DescribeTransactionsResponse, error: &mut dyn FnMut(i16)) {
        r.transaction_states
            .iter()
            .for_each(|t| error(t.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: DescribeTransactionsRequest,
    ) -> Reply<DescribeTransactionsResponse> {
        let access = Access::of(&ctx, &call).await;
        ctx.resync().await;
        let mut response = DescribeTransactionsResponse::default();
        for id in &req.transactional_ids {
            let name = id.0.as_str();
            let mut t = TransactionState::default();
            t.transactional_id = id.clone();
            t.producer_id = ProducerId(-1);
            t.producer_epoch = -1;
            t.transaction_start_time_ms = -1;
            let meta = if !access.transactional_id(Operation::Describe, name) {
                Err(ResponseError::TransactionalIdAuthorizationFailed)
            } else if !ctx.owns_group(name) {
                Err(ResponseError::NotCoordinator)
            } else {
                ctx.txns
                    .states()
                    .get(name)
                    .and_then(|m| m.ok_or(ResponseError::TransactionalIdNotFound))
            };
            match meta {
                Ok(meta) => {
                    t.transaction_state = str_bytes(meta.state.kafka_name());
                    t.transaction_timeout_ms = meta.timeout_ms;
                    t.transaction_start_time_ms = meta.started_ms;
                    t.producer_id = ProducerId(meta.producer_id);
                    t.producer_epoch = meta.producer_epoch;
                    for (topic, p) in &meta.partitions {
                        match t.topics.last_mut() {
                            Some(d) if d.topic.0.as_str() == topic => d.partitions.push(*p as i32),
                            _ => {
                                let mut d = TopicData::default();
                                d.topic = super::topic_name(topic);
                                d.partitions.push(*p as i32);
                                t.topics.push(d);
                            }
                        }
                    }
                }
                Err(e) => t.error_code = e.code(),
            }
            response.transaction_states.push(t);
        }
        Reply::Respond(response)
    }
}
