//! Writing a transaction's markers: one WriteTxnMarkers request to each node that leads
//! some of its partitions (or coordinates one of its groups), over Kafka's wire as
//! Kafka's coordinator does, all at once; the transaction may complete only when every
//! node answered every partition without an error. Markers are safe to send again: a
//! partition where the producer has nothing open ignores one.

use std::time::Duration;

use super::peer::Peers;
use futures_util::future::join_all;
use kafka_protocol::messages::{
    write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic},
    ProducerId, TopicName, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::storage::partition_log::{Marker, MarkerEnds};
use bytes::Bytes;

/// The only WriteTxnMarkers version (v1, flexible; Kafka 4 removed v0).
pub const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// How long a node may take to answer before the markers are retried later.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The partitions one node must mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerTarget {
    /// `host:port` of the node's shard.
    pub addr: String,
    /// Topic and partition of each marker it writes.
    pub partitions: Vec<(String, u32)>,
}

/// The tagged field (weir's own, unknown to Kafka) by which a marker says it ends only
/// transactions before its epoch: Kafka says so with WriteTxnMarkers v2's
/// TransactionVersion, which kafka-protocol 0.18 does not know. Its value is one byte,
/// 2 (transaction version 2); a marker without it ends one at its epoch too.
pub const BUMPED_EPOCH_TAG: i32 = 0x7765;

/// What the markers of `marker` may end, from its tagged fields.
pub fn marker_ends(marker: &WritableTxnMarker) -> MarkerEnds {
    match marker.unknown_tagged_fields.get(&BUMPED_EPOCH_TAG) {
        Some(v) if v.as_ref() == [2] => MarkerEnds::BeforeItsEpoch,
        _ => MarkerEnds::AtItsEpoch,
    }
}

/// Why some markers were not written.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    /// A node could not be reached or did not answer.
    #[error("markers to {addr}: {reason}")]
    Unreachable {
        /// The node.
        addr: String,
        /// What went wrong.
        reason: String,
    },
    /// A node refused a partition's marker.
    #[error("marker for {topic}-{partition} at {addr} refused with error code {code}")]
    Refused {
        /// The node.
        addr: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// Kafka's error code.
        code: i16,
    },
}

/// The request that marks `partitions` with `end`.
pub fn request(end: Marker, partitions: &[(String, u32)]) -> WriteTxnMarkersRequest {
    let mut marker = WritableTxnMarker::default();
    marker.producer_id = ProducerId(end.producer.id.0);
    marker.producer_epoch = end.producer.epoch.0;
    marker.transaction_result = end.commit;
    marker.coordinator_epoch = end.coordinator_epoch.0;
    if end.ends == MarkerEnds::BeforeItsEpoch {
        marker
            .unknown_tagged_fields
            .insert(BUMPED_EPOCH_TAG, Bytes::from_static(&[2]));
    }
    for (topic, partition) in partitions {
        let index = *partition as i32;
        match marker.topics.last_mut() {
            Some(t) if t.name.0.as_str() == topic => t.partition_indexes.push(index),
            _ => {
                let mut t = WritableTxnMarkerTopic::default();
                t.name = TopicName(StrBytes::from_string(topic.clone()));
                t.partition_indexes.push(index);
                marker.topics.push(t);
            }
        }
    }
    let mut request = WriteTxnMarkersRequest::default();
    request.markers.push(marker);
    request
}

/// Sends every target its markers at once; `Ok` when all were written.
pub async fn write(
    peers: &Peers,
    end: Marker,
    targets: &[MarkerTarget],
) -> Result<(), MarkerError> {
    let results = join_all(targets.iter().map(|t| write_one(peers, end, t))).await;
    results.into_iter().collect()
}

async fn write_one(peers: &Peers, end: Marker, target: &MarkerTarget) -> Result<(), MarkerError> {
    let unreachable = |reason: String| MarkerError::Unreachable {
        addr: target.addr.clone(),
        reason,
    };
    let request = request(end, &target.partitions);
    let answer = peers
        .ask(
            &target.addr,
            "weir-txn-markers",
            &request,
            WRITE_TXN_MARKERS_VERSION,
            ANSWER_TIMEOUT,
        )
        .await
        .map_err(unreachable)?;
    for marker in &answer.markers {
        for topic in &marker.topics {
            for p in &topic.partitions {
                if p.error_code != 0 {
                    return Err(MarkerError::Refused {
                        addr: target.addr.clone(),
                        topic: topic.name.0.to_string(),
                        partition: p.partition_index,
                        code: p.error_code,
                    });
                }
            }
        }
    }
    Ok(())
}
