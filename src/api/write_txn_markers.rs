//! WriteTxnMarkers (v1), between weir's own shards and hosts: a transaction
//! coordinator asks the leader of each partition of a transaction to write its COMMIT
//! or ABORT marker (answered once the marker is committed, on every in-sync replica),
//! and the coordinator of each of its groups to commit or drop the offsets pending in
//! it (a marker for `__consumer_offsets` partition *n*: the groups of that coordinator
//! slot in which the producer has pending offsets). CLUSTER_ACTION only.

use std::rc::Rc;

use futures_util::future::join_all;

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
    failure_probe::{self, Probe},
    metadata::{cluster_state::OFFSETS_TOPIC, placement::coordinator_slot},
    security::acl::Operation,
    shard::context::ShardContext,
    txn::markers::{marker_ends, TxnEnd},
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
            let end = TxnEnd {
                producer_id: marker.producer_id.0,
                producer_epoch: marker.producer_epoch,
                commit: marker.transaction_result,
                coordinator_epoch: marker.coordinator_epoch,
                ends: marker_ends(marker),
            };
            // Every partition's marker is appended before any is waited for, so one
            // group commit (and one replication round) makes them all durable: waited
            // for one by one, a transaction over eight partitions paid eight rounds.
            let marked = join_all(marker.topics.iter().flat_map(|topic| {
                let name = topic.name.0.as_str();
                topic.partition_indexes.iter().map(move |&p| async move {
                    if !allowed {
                        Err(ResponseError::ClusterAuthorizationFailed)
                    } else if name == OFFSETS_TOPIC {
                        end_group_offsets(ctx, p, end).await
                    } else {
                        mark_partition(ctx, name, p, end).await
                    }
                })
            }))
            .await;
            if marked.iter().any(Result::is_ok) {
                failure_probe::reached(Probe::TxnMarkerWritten);
            }
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

/// Writes `end`'s marker to partition `p` of `topic`, which this shard must lead, and
/// waits until it is committed.
async fn mark_partition(
    ctx: &ShardContext,
    topic: &str,
    p: i32,
    end: TxnEnd,
) -> Result<(), ResponseError> {
    let log = ctx.partition(topic, p).await.map_err(|e| e.kafka_error())?;
    let epoch = ctx
        .leadership(topic, p as u32)
        .ok_or(ResponseError::NotLeaderOrFollower)?
        .epoch;
    let appended = log
        .append_marker(
            end.producer_id,
            end.producer_epoch,
            end.commit,
            end.coordinator_epoch,
            epoch,
            end.ends,
        )
        .await
        .map_err(|e| e.kafka_error())?;
    appended.durable.await.map_err(|e| e.kafka_error())
}

/// Commits or drops the offsets `end`'s producer has pending in the groups of
/// coordinator slot `slot` that this shard coordinates.
async fn end_group_offsets(
    ctx: &ShardContext,
    slot: i32,
    end: TxnEnd,
) -> Result<(), ResponseError> {
    // Only the slot's coordinator, once it has applied the slot's journal, knows which
    // offsets are pending: anywhere else the marker would find none and be answered
    // done, leaving them pending for good.
    ctx.resync().await;
    if !ctx.coordinates_slot(slot as u32) {
        return Err(ResponseError::NotCoordinator);
    }
    // A TxnOffsetCommit of the producer in flight here either wrote its offsets
    // before (this marker ends them) or sees this marker's epoch and writes nothing.
    let lock = ctx.coordinator.producer_lock(end.producer_id);
    let _held = lock.acquire().await;
    ctx.coordinator
        .note_marker(end.producer_id, end.producer_epoch);
    let store = std::sync::Arc::clone(ctx.coordinator.store());
    let groups = glommio::executor()
        .spawn_blocking(move || store.pending_groups(end.producer_id))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "pending offsets unreadable");
            ResponseError::KafkaStorageError
        })?;
    let table_len = ctx.metadata().view.coordinators.len();
    for group in groups {
        if coordinator_slot(&group, table_len) as i32 != slot {
            continue;
        }
        let journal = ctx.coordinating(&group).await?;
        ctx.coordinator
            .end_pending(
                &group,
                end.producer_id,
                end.producer_epoch,
                end.commit,
                journal,
            )
            .await?;
    }
    Ok(())
}
