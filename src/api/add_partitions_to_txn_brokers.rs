//! AddPartitionsToTxn v4+, the brokers' versions (CLUSTER_ACTION only): several
//! transactions per request, each either added to (a partition leader enrolling a
//! transactions-V2 producer's partition, see `txn::enrol`) or, `verify_only`, checked:
//! open at the producer's epoch with every partition in it (KIP-890 part 1). A partition
//! of `__consumer_offsets` stands for the groups of that coordinator slot, as in Kafka.

use kafka_protocol::{
    messages::{
        add_partitions_to_txn_request::AddPartitionsToTxnTransaction,
        add_partitions_to_txn_response::{
            AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult,
            AddPartitionsToTxnTopicResult,
        },
        AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    },
    ResponseError,
};

use crate::{
    ids::ProducerIdentity,
    metadata::cluster_state::OFFSETS_TOPIC,
    security::acl::Operation,
    shard::context::ShardContext,
    txn::{coordinator::EnrolWait, state},
};

use super::authorize::Access;

/// Answers a v4+ request.
pub async fn answer(
    ctx: &ShardContext,
    access: &Access,
    req: &AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let mut response = AddPartitionsToTxnResponse::default();
    if !access.cluster(Operation::ClusterAction) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return response;
    }
    for txn in &req.transactions {
        let partitions: Vec<(String, u32)> = txn
            .topics
            .iter()
            .flat_map(|t| {
                let name = t.name.0.as_str();
                t.partitions
                    .iter()
                    .map(move |p| (name.to_string(), (*p).max(0) as u32))
            })
            .collect();
        let slots = ctx.metadata().view.coordinators.len();
        let missing = txn.topics.iter().any(|t| {
            let name = t.name.0.as_str();
            t.partitions.iter().any(|&p| match u32::try_from(p) {
                // A group coordinator's slot: there is no journal on a single host.
                Ok(p) if name == OFFSETS_TOPIC => p as usize >= slots,
                Ok(p) => ctx.partition_state(name, p).is_none(),
                Err(_) => true,
            })
        });
        let outcome = if missing {
            Err(ResponseError::UnknownTopicOrPartition)
        } else {
            transaction(ctx, txn, &partitions).await
        };
        response
            .results_by_transaction
            .push(result(txn, outcome.err().map_or(0, |e| e.code())));
    }
    response
}

/// Adds or verifies one transaction's partitions at its coordinator (this shard).
async fn transaction(
    ctx: &ShardContext,
    txn: &AddPartitionsToTxnTransaction,
    partitions: &[(String, u32)],
) -> Result<(), ResponseError> {
    let id = txn.transactional_id.0.as_str();
    let (producer_id, epoch) = (txn.producer_id.0, txn.producer_epoch);
    if txn.verify_only {
        ctx.coordinating(id).await?;
        return state::verify(
            ctx.txns.states().get(id)?.as_ref(),
            producer_id,
            epoch,
            partitions,
        );
    }
    let producer = ProducerIdentity::new(producer_id, epoch);
    ctx.txns
        .add(ctx, id, producer, partitions, &[], EnrolWait::Durable)
        .await
}

/// One transaction's answer: `code` for each of its partitions.
fn result(txn: &AddPartitionsToTxnTransaction, code: i16) -> AddPartitionsToTxnResult {
    let mut result = AddPartitionsToTxnResult::default();
    result.transactional_id = txn.transactional_id.clone();
    for topic in &txn.topics {
        let mut t = AddPartitionsToTxnTopicResult::default();
        t.name = topic.name.clone();
        for &p in &topic.partitions {
            let mut r = AddPartitionsToTxnPartitionResult::default();
            r.partition_index = p;
            r.partition_error_code = code;
            t.results_by_partition.push(r);
        }
        result.topic_results.push(t);
    }
    result
}
