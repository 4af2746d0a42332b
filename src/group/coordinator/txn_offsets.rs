//! The group coordinator's part in transactions: offsets a transactional producer
//! commits (TxnOffsetCommit) wait, pending, until the transaction coordinator's marker
//! reaches the group; then they are committed with their fencing, or dropped.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use kafka_protocol::ResponseError;

use super::{journal_first, Coordinator, OffsetToCommit};
use crate::group::{
    journal::{Journal, JournalRecord},
    offset_store::{Fence, PendingTxn},
};
use crate::ids::ProducerIdentity;
use crate::keyed_lock::KeyLock;

impl Coordinator {
    /// The lock of `producer_id`'s pending offsets on this shard: a marker holds it
    /// while it ends them ([`note_marker`](Self::note_marker) first), a
    /// TxnOffsetCommit while it checks its epoch against the markers
    /// ([`ended_before`](Self::ended_before)) and writes its offsets.
    pub fn producer_lock(&self, producer_id: i64) -> KeyLock {
        self.producers.lock(&producer_id)
    }

    /// A marker of `marker`'s producer at its epoch reached this shard's groups. Call
    /// it holding the producer's lock.
    pub fn note_marker(&self, marker: ProducerIdentity) {
        let (producer_id, epoch) = (marker.id.0, marker.epoch.0);
        let now = Instant::now();
        let mut epochs = self.marker_epochs.borrow_mut();
        let seen = epochs.entry(producer_id).or_insert((epoch, now));
        *seen = (seen.0.max(epoch), now);
    }

    /// Forgets the marker epochs of producers no marker reached for `expiration` (the
    /// partitions' `producer.id.expiration.ms`): a zombie silent that long is not
    /// refused here, as a partition that forgot its producer takes its batches.
    /// Returns how many were forgotten.
    pub fn forget_marker_epochs(&self, expiration: Duration) -> usize {
        let mut epochs = self.marker_epochs.borrow_mut();
        let before = epochs.len();
        epochs.retain(|_, (_, seen)| seen.elapsed() <= expiration);
        before - epochs.len()
    }

    /// True when a marker of a later epoch than `epoch` reached this shard's groups
    /// for `producer_id`: the producer's transaction at `epoch` has ended — aborted
    /// by its coordinator at a bumped epoch (a timeout, a new instance of the
    /// producer), or followed by transactions V2's next one, whose every end bumps the
    /// epoch — so offsets it sends now must not wait for the producer's next COMMIT.
    /// A marker of the same epoch is not one: in V2 it ends the transaction before,
    /// whose markers a TxnOffsetCommit of the next one may have waited for at its
    /// enrolment, and in V1 a producer's own EndTxn does not race its
    /// TxnOffsetCommit. Known since the shard started: a zombie's offsets after a
    /// restart or failover are not refused (issue note).
    pub fn ended_before(&self, producer_id: i64, epoch: i16) -> bool {
        self.marker_epochs
            .borrow()
            .get(&producer_id)
            .is_some_and(|(seen, _)| *seen > epoch)
    }

    /// TxnOffsetCommit: fences the committer as OffsetCommit does when it names its
    /// member and generation (v3+; before that any producer may commit, as in Kafka),
    /// and keeps the offsets pending in transaction `txn`, durably. PRODUCER_FENCED
    /// when the producer has offsets pending here from a later epoch.
    pub async fn commit_pending(
        &self,
        group: &str,
        member: Option<(i32, &str, Option<&str>)>,
        txn: PendingTxn,
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
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
            v2: txn.v2,
            fence,
            offsets: offsets.clone(),
        })
        .await?;
        let logged = tracing::enabled!(tracing::Level::DEBUG).then(|| {
            offsets
                .iter()
                .map(|(t, p, c)| format!("{t}-{p}@{}", c.offset))
                .collect::<Vec<_>>()
        });
        let store = Arc::clone(&self.store);
        let group_id = group.to_string();
        let added = self
            .write(group, move || {
                store.add_pending(&group_id, txn, fence, &offsets)
            })
            .await?;
        if added {
            tracing::debug!(
                group,
                producer_id = txn.producer_id,
                epoch = txn.producer_epoch,
                offsets = ?logged,
                "transactional offsets pending"
            );
            Ok(())
        } else {
            Err(ResponseError::ProducerFenced)
        }
    }

    /// A transaction marker for `producer_id` at `marker_epoch` reached the group: the
    /// offsets its transaction left pending are committed (`commit`) or dropped,
    /// durably; those of a later transaction stay.
    pub async fn end_pending(
        &self,
        group: &str,
        marker: ProducerIdentity,
        commit: bool,
        journal: Option<Journal>,
    ) -> Result<(), ResponseError> {
        let (producer_id, marker_epoch) = (marker.id.0, marker.epoch.0);
        let _pass = journal_first(journal.as_ref(), || JournalRecord::TxnOffsetsEnd {
            group: group.to_string(),
            producer_id,
            producer_epoch: marker_epoch,
            commit,
        })
        .await?;
        let store = Arc::clone(&self.store);
        let group_id = group.to_string();
        let ended = self
            .write(group, move || store.end_pending(&group_id, marker, commit))
            .await?;
        tracing::debug!(
            group,
            producer_id,
            marker_epoch,
            commit,
            ended,
            "transactional offsets ended"
        );
        Ok(())
    }

    /// Runs an LMDB write on the blocking pool and waits until it is durable.
    async fn write<T: Send + 'static>(
        &self,
        group: &str,
        f: impl FnOnce() -> Result<T, crate::group::offset_store::OffsetStoreError> + Send + 'static,
    ) -> Result<T, ResponseError> {
        let value = match glommio::executor().spawn_blocking(f).await {
            Ok(value) => value,
            Err(e) => {
                tracing::error!(group, error = %e, "transactional offsets not written");
                return Err(ResponseError::KafkaStorageError);
            }
        };
        self.syncer.sync().await.map_err(|e| {
            tracing::error!(group, error = %e, "offset sync failed");
            ResponseError::KafkaStorageError
        })?;
        Ok(value)
    }
}
