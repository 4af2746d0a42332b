//! The offsets journal of a cluster: Kafka's `__consumer_offsets`. Every OffsetCommit a
//! coordinator accepts is appended, after its generation fencing, as one record to the
//! internal partition its group maps to, and answered once committed there (on every
//! in-sync replica); every replica of that partition applies the record to its host's
//! LMDB with the same fencing rule. LMDB stays the fenced, queryable state; the
//! replicated log is what survives a host, and a group's coordinator is the leader of
//! its partition, so it moves with that leadership.
//!
//! OffsetDelete and DeleteGroups are journaled the same way, so every replica forgets
//! what the coordinator forgot; so are transactions: offsets pending in one
//! (TxnOffsetCommit), their end, and the transaction coordinators' state changes, whose
//! transactional ids map to journal partitions as group names do. Records are uncompressed, one per request: key = the
//! group, value = JSON of [`JournalRecord`].

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use weir_client::record_batch::BatchBuilder;

use super::offset_store::{CommittedOffset, Fence, OffsetStore, OffsetStoreError};
use crate::storage::{
    batch_records::record_values,
    partition_log::{Durable, Wait},
    record_batch::RecordBatch,
    BatchError, Offset, PartitionLog, ProducePayload, StorageError,
};
use crate::txn::state::TxnMetadata;

/// One change to a group's offsets a coordinator accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JournalRecord {
    /// OffsetCommit.
    Commit {
        /// The group.
        group: String,
        /// How the coordinator fenced it.
        fence: Fence,
        /// Topic, partition and offset of each partition committed.
        offsets: Vec<(String, u32, CommittedOffset)>,
    },
    /// OffsetDelete of partitions nobody in the group consumes.
    DeleteOffsets {
        /// The group.
        group: String,
        /// The partitions whose offsets go.
        partitions: Vec<(String, u32)>,
    },
    /// DeleteGroups of a group without members.
    DeleteGroup {
        /// The group.
        group: String,
    },
    /// TxnOffsetCommit: offsets pending in a producer's open transaction.
    TxnOffsets {
        /// The group.
        group: String,
        /// The transaction's producer.
        producer_id: i64,
        /// How the commit is fenced when it is applied.
        fence: Fence,
        /// Topic, partition and offset of each partition.
        offsets: Vec<(String, u32, CommittedOffset)>,
    },
    /// A transaction marker reached the group: its pending offsets are committed or
    /// dropped.
    TxnOffsetsEnd {
        /// The group.
        group: String,
        /// The transaction's producer.
        producer_id: i64,
        /// True for COMMIT.
        commit: bool,
    },
    /// A transaction coordinator's new state for a transactional id (the record's key
    /// is the id, which maps to this journal partition as a group of that name would).
    Transaction {
        /// The transactional id.
        id: String,
        /// Its state.
        meta: TxnMetadata,
    },
}

impl JournalRecord {
    /// The group it changes (the record's key).
    pub fn group(&self) -> &str {
        match self {
            JournalRecord::Commit { group, .. }
            | JournalRecord::DeleteOffsets { group, .. }
            | JournalRecord::DeleteGroup { group }
            | JournalRecord::TxnOffsets { group, .. }
            | JournalRecord::TxnOffsetsEnd { group, .. } => group,
            JournalRecord::Transaction { id, .. } => id,
        }
    }
}

/// The journal partition a coordinator appends a group's commits to: its log and the
/// leader epoch it leads it in.
pub struct Journal {
    /// The partition's log.
    pub log: PartitionLog,
    /// The coordinator's leader epoch.
    pub epoch: i32,
}

impl Journal {
    /// Appends `record` and waits until every in-sync replica holds it.
    pub async fn append(&self, record: &JournalRecord) -> Result<(), JournalError> {
        self.append_unwaited(record)
            .await?
            .waiting_for(Wait::Committed)
            .await?;
        Ok(())
    }

    /// Appends `record` and returns without waiting: the future resolves once every
    /// in-sync replica holds it. For records a crash may lose without harm.
    pub async fn append_unwaited(&self, record: &JournalRecord) -> Result<Durable, JournalError> {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let payload = encode(record, now_ms)?;
        Ok(self.log.append(&payload, self.epoch).await?.durable)
    }
}

/// Applies every commit stored in `log` to `store`, from its start to its end (a new
/// leader's catch-up: records this host stored but never applied, e.g. before a crash).
/// Re-applying what was applied leaves the same state: the fencing only moves offsets
/// forward within a generation, and resets replay in their order.
pub async fn replay(log: &PartitionLog, store: &Arc<OffsetStore>) -> Result<usize, JournalError> {
    let end = log.log_end();
    let mut at = log.log_start_offset();
    let mut applied = 0;
    while at < end {
        let read = log.read_replica(at, 1 << 20).await?;
        if read.records.is_empty() {
            break;
        }
        let payload = ProducePayload::validate(read.records, usize::MAX)?;
        let next = payload.batches().last().map_or(at, |b| {
            Offset((b.base_offset() + i64::from(b.last_offset_delta()) + 1) as u64)
        });
        let records = decode(&payload)?;
        applied += records.len();
        apply(store, records).await?;
        at = next;
    }
    Ok(applied)
}

/// Why a journal could not be written or applied.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The record could not be appended or was not committed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A stored batch or record is not one this journal wrote.
    #[error("offsets journal: {0}")]
    Malformed(String),
    /// LMDB refused the commit.
    #[error(transparent)]
    Store(#[from] OffsetStoreError),
}

impl From<BatchError> for JournalError {
    fn from(e: BatchError) -> Self {
        JournalError::Malformed(e.to_string())
    }
}

/// `record` as a one-record batch.
pub fn encode(record: &JournalRecord, now_ms: i64) -> Result<ProducePayload, JournalError> {
    let value = serde_json::to_vec(record).map_err(|e| JournalError::Malformed(e.to_string()))?;
    let key = record.group().as_bytes();
    let mut builder = BatchBuilder::new(value.len() + key.len() + 64, now_ms);
    builder.push(now_ms, Some(key), &value);
    let bytes: Bytes = builder.finish();
    Ok(ProducePayload::validate(bytes, usize::MAX)?)
}

/// The records in `payload`'s batches, in order.
pub fn decode(payload: &ProducePayload) -> Result<Vec<JournalRecord>, JournalError> {
    let mut out = Vec::new();
    for batch in payload.batches() {
        out.extend(decode_batch(&batch)?);
    }
    Ok(out)
}

fn decode_batch(batch: &RecordBatch<'_>) -> Result<Vec<JournalRecord>, JournalError> {
    let values = record_values(batch).map_err(|e| JournalError::Malformed(e.to_string()))?;
    values
        .into_iter()
        .flatten()
        .map(|v| serde_json::from_slice(&v).map_err(|e| JournalError::Malformed(e.to_string())))
        .collect()
}

/// Applies `records` to `store` in order (commits with their fencing), off the
/// reactor, and makes them durable there.
pub async fn apply(
    store: &Arc<OffsetStore>,
    records: Vec<JournalRecord>,
) -> Result<(), JournalError> {
    if records.is_empty() {
        return Ok(());
    }
    let store = Arc::clone(store);
    glommio::executor()
        .spawn_blocking(move || {
            for r in &records {
                match r {
                    JournalRecord::Commit {
                        group,
                        fence,
                        offsets,
                    } => {
                        let refs: Vec<(&str, u32, _)> = offsets
                            .iter()
                            .map(|(t, p, c)| (t.as_str(), *p, c.clone()))
                            .collect();
                        store.commit(group, *fence, &refs)?;
                    }
                    JournalRecord::DeleteOffsets { group, partitions } => {
                        store.delete_offsets(group, partitions)?;
                    }
                    JournalRecord::DeleteGroup { group } => {
                        store.delete_group(group)?;
                    }
                    JournalRecord::TxnOffsets {
                        group,
                        producer_id,
                        fence,
                        offsets,
                    } => store.add_pending(group, *producer_id, *fence, offsets)?,
                    JournalRecord::TxnOffsetsEnd {
                        group,
                        producer_id,
                        commit,
                    } => {
                        store.end_pending(group, *producer_id, *commit)?;
                    }
                    JournalRecord::Transaction { id, meta } => store.put_transaction(id, meta)?,
                }
            }
            store.sync()
        })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_record_round_trips_through_a_batch() {
        let record = JournalRecord::Commit {
            group: "g".into(),
            fence: Fence::Generation(3),
            offsets: vec![(
                "orders".into(),
                2,
                CommittedOffset {
                    offset: 42,
                    leader_epoch: 1,
                    generation: 3,
                    committed_at_ms: 7,
                    metadata: "m".into(),
                },
            )],
        };
        let payload = encode(&record, 7).expect("encode");
        assert_eq!(decode(&payload).expect("decode"), vec![record]);
        let deleted = JournalRecord::DeleteGroup { group: "g".into() };
        let payload = encode(&deleted, 8).expect("encode");
        assert_eq!(decode(&payload).expect("decode"), vec![deleted]);
    }
}
