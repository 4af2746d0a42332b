//! Writing a transaction's markers where this shard leads the partitions: what a
//! WriteTxnMarkers request asks of its receiver, and what a transaction coordinator
//! does itself, without a request, for the partitions of its own shard.

use futures_util::future::join_all;
use kafka_protocol::ResponseError;

use super::context::ShardContext;
use crate::metadata::partition_error::PartitionError;
use crate::{
    failure_probe::{self, Probe},
    ids::LeaderEpoch,
    metadata::{cluster_state::OFFSETS_TOPIC, placement::coordinator_slot},
    storage::{partition_log::Marker, StorageError},
};

/// Why a marker was not written to a partition (`api::error_code` says which Kafka
/// error each is).
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    /// The partition is unknown here, owned elsewhere, or its log is failing.
    #[error("partition not served here: {0:?}")]
    Partition(PartitionError),
    /// This shard holds the partition but does not lead it.
    #[error("not the partition's leader")]
    NotLeader,
    /// The marker could not be appended or made durable.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The group coordinator refused to end the producer's pending offsets.
    #[error("group coordinator: {0:?}")]
    Group(ResponseError),
}

impl ShardContext {
    /// Writes `end`'s markers to `partitions` (each a partition this shard leads, or a
    /// `__consumer_offsets` partition standing for the groups of the coordinator slot this
    /// shard coordinates) and waits until all are committed: one outcome per partition, in
    /// order. What a WriteTxnMarkers request asks of its receiver, and what a transaction
    /// coordinator does itself for the partitions of its own shard.
    pub async fn write_markers<'a>(
        &self,
        end: Marker,
        partitions: impl Iterator<Item = (&'a str, i32)>,
    ) -> Vec<Result<(), MarkerError>> {
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

impl From<PartitionError> for MarkerError {
    fn from(e: PartitionError) -> Self {
        MarkerError::Partition(e)
    }
}

/// Writes `end`'s marker to partition `p` of `topic`, which this shard must lead, and
/// waits until it is committed.
async fn mark_partition(
    ctx: &ShardContext,
    topic: &str,
    p: i32,
    end: Marker,
) -> Result<(), MarkerError> {
    let log = ctx.partition(topic, p).await?;
    let leader = ctx
        .leadership(topic, p as u32)
        .ok_or(MarkerError::NotLeader)?
        .epoch;
    let appended = log.append_marker(end, LeaderEpoch(leader)).await?;
    Ok(appended.durable.await?)
}

/// Commits or drops the offsets `end`'s producer has pending in the groups of
/// coordinator slot `slot` that this shard coordinates.
async fn end_group_offsets(ctx: &ShardContext, slot: i32, end: Marker) -> Result<(), MarkerError> {
    end_group_offsets_in(ctx, slot, end)
        .await
        .map_err(MarkerError::Group)
}

/// [`end_group_offsets`], its refusals as Kafka's.
async fn end_group_offsets_in(
    ctx: &ShardContext,
    slot: i32,
    end: Marker,
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
    let lock = ctx.coordinator.producer_lock(end.producer.id.0);
    let _held = lock.acquire().await;
    ctx.coordinator.note_marker(end.producer);
    let store = std::sync::Arc::clone(ctx.coordinator.store());
    let groups = glommio::executor()
        .spawn_blocking(move || store.pending_groups(end.producer.id.0))
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
            .end_pending(&group, end.producer, end.commit, journal)
            .await?;
    }
    Ok(())
}
