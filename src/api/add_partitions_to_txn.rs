//! AddPartitionsToTxn: v0–v3, the client's versions, enrol partitions in the
//! producer's open transaction at its coordinator, so the coordinator knows where to
//! write its markers; refused as a whole when the transactional id or a topic is not
//! writable or a partition does not exist (the others answer OPERATION_NOT_ATTEMPTED,
//! as Kafka does). v4+ are the brokers' (`add_partitions_to_txn_brokers`).

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        add_partitions_to_txn_response::{
            AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
        },
        AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    },
    ResponseError,
};

use crate::{
    ids::ProducerIdentity, security::acl::Operation, shard::context::ShardContext,
    txn::coordinator::EnrolWait,
};

use super::{
    add_partitions_to_txn_brokers, authorize::Access, error_code::fenced_before, Call, Handler,
    Reply,
};

/// AddPartitionsToTxn.
pub struct AddPartitionsToTxn;

impl Handler for AddPartitionsToTxn {
    type Request = AddPartitionsToTxnRequest;
    type Response = AddPartitionsToTxnResponse;

    fn errors(r: &AddPartitionsToTxnResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
        let brokers = r
            .results_by_transaction
            .iter()
            .flat_map(|t| &t.topic_results);
        for t in r.results_by_topic_v3_and_below.iter().chain(brokers) {
            t.results_by_partition
                .iter()
                .for_each(|p| error(p.partition_error_code));
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: AddPartitionsToTxnRequest,
    ) -> Reply<AddPartitionsToTxnResponse> {
        let access = Access::of(&ctx, &call).await;
        if call.version() >= 4 {
            return Reply::Respond(
                add_partitions_to_txn_brokers::answer(&ctx, &access, &req).await,
            );
        }
        let id = req.v3_and_below_transactional_id.0.as_str();
        let mut partitions = Vec::new();
        let mut refused: Vec<(String, i32, ResponseError)> = Vec::new();
        for topic in &req.v3_and_below_topics {
            let name = topic.name.0.as_str();
            for &p in &topic.partitions {
                let exists = u32::try_from(p)
                    .ok()
                    .and_then(|p| ctx.partition_state(name, p))
                    .is_some();
                if !access.topic(Operation::Write, name) {
                    refused.push((name.to_string(), p, ResponseError::TopicAuthorizationFailed));
                } else if !exists {
                    refused.push((name.to_string(), p, ResponseError::UnknownTopicOrPartition));
                } else {
                    partitions.push((name.to_string(), p as u32));
                }
            }
        }
        let outcome = if !access.transactional_id(Operation::Write, id) {
            Err(ResponseError::TransactionalIdAuthorizationFailed)
        } else if !refused.is_empty() {
            Err(ResponseError::OperationNotAttempted)
        } else {
            ctx.txns
                .add(
                    &*ctx,
                    id,
                    ProducerIdentity::new(
                        req.v3_and_below_producer_id.0,
                        req.v3_and_below_producer_epoch,
                    ),
                    &partitions,
                    &[],
                    EnrolWait::Durable,
                )
                .await
        };
        let code = outcome
            .err()
            .map_or(0, |e| fenced_before(e, call.version(), 2).code());
        let mut response = AddPartitionsToTxnResponse::default();
        let answers = partitions
            .into_iter()
            .map(|(t, p)| (t, p as i32, code))
            .chain(refused.into_iter().map(|(t, p, e)| (t, p, e.code())));
        for (topic, partition, code) in answers {
            let mut r = AddPartitionsToTxnPartitionResult::default();
            r.partition_index = partition;
            r.partition_error_code = code;
            let results = &mut response.results_by_topic_v3_and_below;
            match results.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.results_by_partition.push(r),
                None => {
                    let mut t = AddPartitionsToTxnTopicResult::default();
                    t.name = super::topic_name(&topic);
                    t.results_by_partition.push(r);
                    results.push(t);
                }
            }
        }
        Reply::Respond(response)
    }
}
