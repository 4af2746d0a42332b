//! Writing a transaction's markers where this shard leads the partitions: what a
//! WriteTxnMarkers request asks of its receiver, and what a transaction coordinator
//! does itself, without a request, for the partitions of its own shard.

use futures_util::future::join_all;
use kafka_protocol::ResponseError;

use super::context::ShardContext;
use crate::{
    api::error_code::KafkaError,
    failure_probe::{self, Probe},
    metadata::{cluster_state::OFFSETS_TOPIC, placement::coordinator_slot},
    txn::markers::TxnEnd,
};

impl ShardContext {
    /// Writes `end`'s markers to `partitions` (each a partition this shard leads, or a
    /// `__consumer_offsets` partition standing for the groups of the coordinator slot this
    /// shard coordinates) and waits until all are committed: one outcome per partition, in
    /// order. What a WriteTxnMarkers request asks of its receiver, and what a transaction
    /// coordinator does itself for the partitions of its own shard.
    pub async fn write_markers<'a>(
        &self,
        end: TxnEnd,
        partitions: impl Iterator<Item = (&'a str, i32)>,
    ) -> Vec<Result<(), ResponseError>> {
        // Every partition's marker is appended before any is waited for, so one group
        // commit (and one replication round) makes them all durable: waited for one by
        // one, a transaction over eight partitions paid eight rounds.
        let marked = join_all(partitions.map(|(name, p)| async move {
            if name == OFFSETS_TOPIC {
                end_group_offsets(self, p, end).await
            } else {
                mark_partition(self, name, p, end).await
            }
        }))
        .await;
        if marked.iter().any(Result::is_ok) {
            failure_probe::reached(Probe::TxnMarkerWritten);
        }
        marked
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
