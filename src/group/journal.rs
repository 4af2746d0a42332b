//! The offsets journal of a cluster: Kafka's `__consumer_offsets`. Every OffsetCommit a
//! coordinator accepts is appended, after its generation fencing, as one record to the
//! internal partition its group maps to, and answered once committed there (on every
//! in-sync replica), then applied to the coordinator's LMDB. LMDB stays the fenced,
//! queryable state; the replicated log is what survives a host, and a group's
//! coordinator is the leader of its partition, so it moves with that leadership: a
//! replica that takes it up first replays its log into its host's LMDB with the same
//! fencing rule ([`replay`]). Followers do not apply records as they arrive, since one
//! they hold may not be committed and a divergent tail cut would take the record but
//! not its effect.
//!
//! OffsetDelete and DeleteGroups are journaled the same way, so a new coordinator
//! forgets what the old one forgot; so are transactions: offsets pending in one
//! (TxnOffsetCommit), their end, and the transaction coordinators' state changes, whose
//! transactional ids map to journal partitions as group names do. Records are
//! uncompressed, one per request: key = the group, value = JSON of [`JournalRecord`].
//!
//! The journal does not grow with the commits: once it is large, its leader writes a
//! snapshot of the partition's state behind a [`SnapshotStart`](JournalRecord::SnapshotStart)
//! and moves the log start to it (`journal_snapshot`). A replay that starts at a
//! snapshot holds the whole state, so it first clears what this host stored for the
//! partition: a replica that missed a deletion while away keeps nothing stale.

use std::{rc::Rc, sync::Arc};

use serde::{Deserialize, Serialize};
use weir_client::record_batch::BatchBuilder;

use super::offset_store::{CommittedOffset, Fence, OffsetStore, OffsetStoreError, PendingTxn};
use crate::ids::ProducerIdentity;
use crate::semaphore::{Semaphore, StaticPermit};
use crate::storage::{
    batch_records::record_values,
    clock::Clock,
    partition_log::{Durable, Wait},
    record_batch::RecordBatch,
    BatchError, Offset, PartitionLog, ProducePayload, StorageError,
};

/// Another coordinator's state for a key of a journal partition (a transactional id's),
/// opaque to the group layer: the JSON text its owner encoded (`txn::stored`), which the
/// journal carries and LMDB stores byte for byte, never parsed here.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OpaqueState(Box<serde_json::value::RawValue>);

impl OpaqueState {
    /// `value` as JSON.
    pub fn encode<T: Serialize>(value: &T) -> Result<OpaqueState, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(OpaqueState)
    }

    /// A state stored as `text`, refused unless it is JSON.
    pub fn from_json(text: String) -> Result<OpaqueState, serde_json::Error> {
        serde_json::value::RawValue::from_string(text).map(OpaqueState)
    }

    /// The JSON text.
    pub fn json(&self) -> &str {
        self.0.get()
    }
}

/// The same text is the same state.
impl PartialEq for OpaqueState {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

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
        /// The transaction's epoch (-1 in records written before it was recorded).
        #[serde(default = "unknown_epoch")]
        producer_epoch: i16,
        /// True for a transaction of transactions V2.
        #[serde(default)]
        v2: bool,
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
        /// The marker's epoch (the largest in records written before it was recorded,
        /// which ended any transaction of the producer).
        #[serde(default = "any_epoch")]
        producer_epoch: i16,
        /// True for COMMIT.
        commit: bool,
    },
    /// A transaction coordinator's new state for a transactional id (the record's key
    /// is the id, which maps to this journal partition as a group of that name would).
    Transaction {
        /// The transactional id.
        id: String,
        /// Its state, as its coordinator encoded it.
        meta: OpaqueState,
    },
    /// A transactional id unused for longer than the expiration is forgotten (Kafka's
    /// tombstone in the transaction log).
    TransactionExpired {
        /// The transactional id.
        id: String,
    },
    /// The first record of a snapshot: what follows, up to the next request's record,
    /// restates the whole partition's state. Applying it changes nothing; a replay that
    /// starts at it clears the partition's state first.
    SnapshotStart,
}

fn unknown_epoch() -> i16 {
    -1
}

fn any_epoch() -> i16 {
    i16::MAX
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
            JournalRecord::Transaction { id, .. } | JournalRecord::TransactionExpired { id } => id,
            JournalRecord::SnapshotStart => "",
        }
    }
}

/// Who may append to a journal partition its leader's shard holds: every change takes
/// one unit from its append until its write to LMDB, a snapshot takes them all, so the
/// store a snapshot reads holds every record appended before it and none after.
pub struct JournalGate {
    units: Rc<Semaphore>,
    /// The size of the last snapshot written, in bytes (0 before the first).
    pub snapshot_bytes: std::cell::Cell<u64>,
}

/// Units of a [`JournalGate`]: more than there are changes in flight.
const GATE_UNITS: u64 = 1 << 32;

impl Default for JournalGate {
    fn default() -> Self {
        JournalGate {
            units: Rc::new(Semaphore::new(GATE_UNITS)),
            snapshot_bytes: std::cell::Cell::new(0),
        }
    }
}

impl JournalGate {
    /// Waits until no change is in flight and holds off new ones until the permit is
    /// dropped.
    pub async fn exclusive(&self) -> Result<StaticPermit, JournalError> {
        self.units
            .acquire_static_permit(GATE_UNITS)
            .await
            .map_err(|_| JournalError::Malformed("journal gate closed".into()))
    }

    async fn pass(&self) -> Result<JournalPass, JournalError> {
        let permit = self
            .units
            .acquire_static_permit(1)
            .await
            .map_err(|_| JournalError::Malformed("journal gate closed".into()))?;
        Ok(JournalPass(permit))
    }
}

/// A change in flight through the journal: keep it until the change is written to this
/// host's LMDB, so a snapshot never misses it.
#[must_use = "hold the pass until the change is in LMDB"]
pub struct JournalPass(#[allow(dead_code)] StaticPermit);

/// The journal partition a coordinator appends a group's commits to: its log, the
/// leader epoch it leads it in and its gate.
pub struct Journal {
    /// The partition's log.
    pub log: PartitionLog,
    /// The coordinator's leader epoch.
    pub epoch: i32,
    /// Its gate (shared by every change to the partition on this shard).
    pub gate: Rc<JournalGate>,
}

impl Journal {
    /// Appends `record` and waits until every in-sync replica holds it; the pass is to
    /// be held until the change is in LMDB.
    pub async fn append(&self, record: &JournalRecord) -> Result<JournalPass, JournalError> {
        let (durable, pass) = self.append_unwaited(record).await?;
        durable.waiting_for(Wait::Committed).await?;
        Ok(pass)
    }

    /// Appends `record` and returns without waiting: the future resolves once every
    /// in-sync replica holds it. For records a crash may lose without harm.
    pub async fn append_unwaited(
        &self,
        record: &JournalRecord,
    ) -> Result<(Durable, JournalPass), JournalError> {
        let pass = self.gate.pass().await?;
        let payload = encode(std::slice::from_ref(record), Clock::System.now_ms())?;
        Ok((self.log.append(&payload, self.epoch).await?.durable, pass))
    }
}

/// Applies every change stored in `log` to `store`, from its start to its end (a new
/// leader's catch-up: records this host stored but never applied, e.g. before a crash).
/// When the log starts at a snapshot it holds the partition's whole state, so what
/// `store` holds for the names `owns` accepts is cleared first; any other log is applied
/// over what is stored (a log from offset 0 may lack offsets committed before the host
/// joined a cluster, which only its LMDB holds until a snapshot restates them; one cut
/// by time retention before snapshots existed lacks older ones). Re-applying what was applied leaves the same state: the fencing
/// only moves offsets forward within a generation, and resets replay in their order.
pub async fn replay(
    log: &PartitionLog,
    store: &Arc<OffsetStore>,
    owns: impl Fn(&str) -> bool + Send + 'static,
) -> Result<usize, JournalError> {
    let end = log.log_end();
    let mut at = log.log_start_offset();
    let mut owns = Some(owns);
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
        if let Some(owns) = owns.take() {
            if records.first() == Some(&JournalRecord::SnapshotStart) {
                clear(store, owns).await?;
            }
        }
        applied += records.len();
        apply(store, records).await?;
        at = next;
    }
    Ok(applied)
}

/// Deletes what `store` holds for the names `owns` accepts, off the reactor.
async fn clear(
    store: &Arc<OffsetStore>,
    owns: impl Fn(&str) -> bool + Send + 'static,
) -> Result<(), JournalError> {
    let store = Arc::clone(store);
    glommio::executor()
        .spawn_blocking(move || store.clear_slot(&owns).map(drop))
        .await?;
    Ok(())
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

/// `records` as one batch, in order.
pub fn encode(records: &[JournalRecord], now_ms: i64) -> Result<ProducePayload, JournalError> {
    let mut batches = encode_batches(records, usize::MAX, now_ms)?;
    batches
        .pop()
        .ok_or_else(|| JournalError::Malformed("no record to journal".into()))
}

/// `records` in order, as batches of about `batch_bytes` each (a record larger than
/// that is a batch of its own).
pub fn encode_batches(
    records: &[JournalRecord],
    batch_bytes: usize,
    now_ms: i64,
) -> Result<Vec<ProducePayload>, JournalError> {
    let mut out = Vec::new();
    let mut builder: Option<BatchBuilder> = None;
    for record in records {
        let value =
            serde_json::to_vec(record).map_err(|e| JournalError::Malformed(e.to_string()))?;
        let key = record.group().as_bytes();
        let size = key.len() + value.len() + 32;
        if let Some(full) = builder.take_if(|b| b.bytes() + size > batch_bytes) {
            out.push(ProducePayload::validate(full.finish(), usize::MAX)?);
        }
        builder
            .get_or_insert_with(|| BatchBuilder::new(size.min(batch_bytes) + 64, now_ms))
            .push(now_ms, Some(key), &value);
    }
    if let Some(last) = builder {
        out.push(ProducePayload::validate(last.finish(), usize::MAX)?);
    }
    Ok(out)
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
            apply_to(&store, &records)?;
            store.sync()
        })
        .await?;
    Ok(())
}

/// Applies `records` to `store` in order, unsynced. Blocking.
pub fn apply_to(store: &OffsetStore, records: &[JournalRecord]) -> Result<(), OffsetStoreError> {
    for r in records {
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
                producer_epoch,
                v2,
                fence,
                offsets,
            } => {
                let txn = PendingTxn {
                    producer_id: *producer_id,
                    producer_epoch: *producer_epoch,
                    v2: *v2,
                };
                store.add_pending(group, txn, *fence, offsets)?;
            }
            JournalRecord::TxnOffsetsEnd {
                group,
                producer_id,
                producer_epoch,
                commit,
            } => {
                store.end_pending(
                    group,
                    ProducerIdentity::new(*producer_id, *producer_epoch),
                    *commit,
                )?;
            }
            JournalRecord::Transaction { id, meta } => {
                store.put_raw_transaction(id, meta.json().as_bytes())?;
            }
            JournalRecord::TransactionExpired { id } => store.remove_transaction(id)?,
            JournalRecord::SnapshotStart => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_a_batch() {
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
        let deleted = JournalRecord::DeleteGroup { group: "g".into() };
        let records = vec![JournalRecord::SnapshotStart, record, deleted];
        let payload = encode(&records, 7).expect("encode");
        assert_eq!(decode(&payload).expect("decode"), records);
    }
}
