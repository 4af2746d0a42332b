//! WriteTxnMarkers (v1), between weir's own shards and hosts: a transaction
//! coordinator asks the leader of each partition of a transaction to write its COMMIT
//! or ABORT marker (answered once the marker is committed, on every in-sync replica),
//! and the coordinator of each of its groups to commit or drop the offsets pending in
//! it (a marker for `__consumer_offsets` partition *n*: the groups of that coordinator
//! slot in which the producer has pending offsets). CLUSTER_ACTION only.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        write_txn_markers_response::{
            WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
        },
        WriteTxnMarkersRequest, WriteTxnMarkersResponse,
    },
    ResponseError,
};

use crate::{
    ids::{CoordinatorEpoch, ProducerIdentity},
    security::acl::Operation,
    shard::context::ShardContext,
    storage::partition_log::Marker,
    txn::markers::marker_ends,
};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

/// WriteTxnMarkers.
pub struct WriteTxnMarkers;

impl Handler for WriteTxnMarkers {
    type Request = WriteTxnMarkersRequest;
    type Response = WriteTxnMarkersResponse;

    fn errors(r: &WriteTxnMarkersResponse, error: &mut dyn FnMut(i16)) {
        for m in &r.markers {
            for t in &m.topics {
                t.partitions.iter().for_each(|p| error(p.error_code));
            }
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: WriteTxnMarkersRequest,
    ) -> Reply<WriteTxnMarkersResponse> {
        let allowed = Access::of(&ctx, &call)
            .await
            .cluster(Operation::ClusterAction);
        let mut response = WriteTxnMarkersResponse::default();
        let ctx = &ctx;
        for marker in &req.markers {
            let end = Marker {
                producer: ProducerIdentity::new(marker.producer_id.0, marker.producer_epoch),
                commit: marker.transaction_result,
                coordinator_epoch: CoordinatorEpoch(marker.coordinator_epoch),
                ends: marker_ends(marker),
            };
            let partitions = marker.topics.iter().flat_map(|topic| {
                let name = topic.name.0.as_str();
                topic.partition_indexes.iter().map(move |&p| (name, p))
            });
            let marked: Vec<Result<(), ResponseError>> = if allowed {
                ctx.write_markers(end, partitions)
                    .await
                    .into_iter()
                    .map(|r| r.map_err(|e| e.kafka_error()))
                    .collect()
            } else {
                partitions
                    .map(|_| Err(ResponseError::ClusterAuthorizationFailed))
                    .collect()
            };
            let mut outcomes = marked.into_iter();
            let mut result = WritableTxnMarkerResult::default();
            result.producer_id = marker.producer_id;
            for topic in &marker.topics {
                let mut t = WritableTxnMarkerTopicResult::default();
                t.name = topic.name.clone();
                for &p in &topic.partition_indexes {
                    let mut r = WritableTxnMarkerPartitionResult::default();
                    r.partition_index = p;
                    r.error_code = outcomes
                        .next()
                        .and_then(Result::err)
                        .map_or(0, |e| e.code());
                    t.partitions.push(r);
                }
                result.topics.push(t);
            }
            response.markers.push(result);
        }
        Reply::Respond(response)
    }
}
