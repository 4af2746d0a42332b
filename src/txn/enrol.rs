//! Enrolling partitions in a transaction from another host: in transactions V2 the
//! producer no longer sends AddPartitionsToTxn, so the leader of a partition its
//! transactional batch reaches (and the coordinator of a group its TxnOffsetCommit
//! reaches) adds the partition at the transaction's coordinator itself, with the
//! brokers' AddPartitionsToTxn (v5, one transaction, not verify-only), as Kafka's
//! partition leaders do.

use std::time::Duration;

use super::peer::Peers;
use kafka_protocol::{
    messages::{
        add_partitions_to_txn_request::{AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction},
        AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId,
    },
    protocol::StrBytes,
    ResponseError,
};

/// The brokers' AddPartitionsToTxn version (v5: TRANSACTION_ABORTABLE known).
pub const BROKER_ADD_PARTITIONS_VERSION: i16 = 5;

/// How long the coordinator may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The request that adds `partitions` to `id`'s open transaction (opening one).
pub fn request(
    id: &str,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, u32)],
) -> AddPartitionsToTxnRequest {
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id = TransactionalId(StrBytes::from_string(id.to_string()));
    txn.producer_id = ProducerId(producer_id);
    txn.producer_epoch = epoch;
    txn.verify_only = false;
    for (topic, partition) in partitions {
        let index = *partition as i32;
        match txn.topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(index),
            None => {
                let mut t = AddPartitionsToTxnTopic::default();
                t.name = TopicName(StrBytes::from_string(topic.clone()));
                t.partitions.push(index);
                txn.topics.push(t);
            }
        }
    }
    let mut request = AddPartitionsToTxnRequest::default();
    request.transactions.push(txn);
    request
}

/// Adds `partitions` to `id`'s transaction at its coordinator `addr`; the first error
/// the coordinator answered, or COORDINATOR_NOT_AVAILABLE when it could not be asked.
pub async fn add_remotely(
    peers: &Peers,
    addr: &str,
    id: &str,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, u32)],
) -> Result<(), ResponseError> {
    let request = request(id, producer_id, epoch, partitions);
    let answer = peers
        .ask(
            addr,
            "weir-txn-enrol",
            &request,
            BROKER_ADD_PARTITIONS_VERSION,
            ANSWER_TIMEOUT,
        )
        .await
        .map_err(|reason| {
            tracing::info!(id, addr, reason, "transaction coordinator not reached");
            ResponseError::CoordinatorNotAvailable
        })?;
    let codes = std::iter::once(answer.error_code).chain(
        answer
            .results_by_transaction
            .iter()
            .flat_map(|r| &r.topic_results)
            .flat_map(|t| &t.results_by_partition)
            .map(|p| p.partition_error_code),
    );
    match codes.into_iter().find(|c| *c != 0) {
        None => Ok(()),
        Some(code) => {
            Err(ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError))
        }
    }
}
