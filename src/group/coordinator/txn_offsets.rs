//! The group coordinator's part in transactions: offsets a transactional producer
//! commits (TxnOffsetCommit) wait, pending, until the transaction coordinator's marker
//! reaches the group; then they are committed with their fencing, or dropped.

use std::sync::Arc;

use kafka_protocol::ResponseError;

use super::{journal_first, Coordinator, OffsetToCommit};
use crate::group::{
    journal::{Journal, JournalRecord},
    offset_store::Fence,
};
use crate::keyed_lock::KeyLock;

impl Coordinator {
    /// The lock of `producer_id`'s pending offsets on this shard. A marker holds it
    /// while it ends them and announces the change; a TxnOffsetCommit takes the handle
    /// before it learns its transaction is open (V2's enrolment at the transaction
    /// coordinator, which it must not wait for holding the lock) and writes its
    /// offsets holding it only if no marker came meanwhile: a marker that aborted the
    /// transaction in between would otherwise leave them pending for the producer's
    /// next transaction to commit.
    pub fn producer_lock(&self, producer_id: i64) -> KeyLock {
        self.producers.lock(&producer_id)
    }

    /// TxnOffsetCommit: fences the committer as OffsetCommit does when it names its
    /// member and generation (v3+; before that any producer may commit, as in Kafka),
    /// and keeps the offsets pending in `producer_id`'s transaction, durably.
    pub async fn commit_pending(
        &self,
        group: &str,
        member: Option<(i32, &str, Option<&str>)>,
        producer_id: i64,
        offsets: Vec<OffsetToCommit>,
        journal: Option<Journal>,
    ) -> Result<(), ResponseError> {
        let fence = match member {
            Some((generation, member_id, instance)) if generation >= 0 => {
                self.commit_fence(group, generation, member_id, instance)?
            }
            _ => Fence::Reset,
        };
        let _pass = journal_first(journal.as_ref(), || JournalRecord::TxnOffsets {
            group: group.to_string(),
            producer_id,
            fence,
            offsets: offsets.clone(),
        })
        .await?;
        let store = Arc::clone(&self.store);
        let group_id = group.to_string();
        self.write(group, move || {
            store.add_pending(&group_id, producer_id, fence, &offsets)
        })
        .await
    }

    /// A transaction marker for `producer_id` reached the group: its pending offsets
    /// are committed (`commit`) or dropped, durably.
    pub async fn end_pending(
        &self,
        group: &str,
        producer_id: i64,
        commit: bool,
        journal: Option<Journal>,
    ) -> Result<(), ResponseError> {
        let _pass = journal_first(journal.as_ref(), || JournalRecord::TxnOffsetsEnd {
            group: group.to_string(),
            producer_id,
            commit,
        })
        .await?;
        let store = Arc::clone(&self.store);
        let group_id = group.to_string();
        self.write(group, move || {
            store
                .end_pending(&group_id, producer_id, commit)
                .map(|_| ())
        })
        .await
    }

    /// Runs an LMDB write on the blocking pool and waits until it is durable.
    async fn write(
        &self,
        group: &str,
        f: impl FnOnce() -> Result<(), crate::group::offset_store::OffsetStoreError> + Send + 'static,
    ) -> Result<(), ResponseError> {
        if let Err(e) = glommio::executor().spawn_blocking(f).await {
            tracing::error!(group, error = %e, "transactional offsets not written");
            return Err(ResponseError::KafkaStorageError);
        }
        self.syncer.sync().await.map_err(|e| {
            tracing::error!(group, error = %e, "offset sync failed");
            ResponseError::KafkaStorageError
        })
    }
}
