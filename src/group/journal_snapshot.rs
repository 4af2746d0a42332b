//! Keeping an offsets journal partition bounded by its live state rather than by the
//! commits it ever took (Kafka compacts `__consumer_offsets` by key; weir's records
//! carry whole requests, so it snapshots instead).
//!
//! Once a partition's log is twice as large as its last snapshot (and has a sealed
//! segment to free), its leader:
//! 1. holds off every change (the [`JournalGate`]) until those in flight are in LMDB;
//! 2. reads the partition's state from LMDB — committed offsets, offsets pending in
//!    transactions, transaction coordinator states — and appends it behind a
//!    [`JournalRecord::SnapshotStart`], as ordinary records (commits as resets), then
//!    lets changes through again;
//! 3. once every in-sync replica holds the snapshot, moves the log start to its first
//!    record (DeleteRecords; followers follow), so whole segments before it go.
//!
//! A crash before step 3 leaves the old log start: the snapshot's records restate what
//! the records before them built, so replaying both gives the same state. After step 3 a
//! replay starts at the snapshot and clears the partition's state first
//! ([`replay`](super::journal::replay)).

use std::sync::Arc;

use super::{
    journal::{encode_batches, Journal, JournalError, JournalGate, JournalRecord, OpaqueState},
    offset_store::{Fence, OffsetStore, OffsetStoreError, SlotState},
};
use crate::storage::{clock::Clock, partition_log::Wait, Offset, PartitionLog};

/// A snapshot is appended in batches of about this size.
const SNAPSHOT_BATCH_BYTES: usize = 1 << 20;

/// What one snapshot did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotReport {
    /// Records the snapshot holds (its start included).
    pub records: usize,
    /// Bytes it takes in the log.
    pub bytes: u64,
    /// The partition's bytes on disk before it.
    pub log_bytes_before: u64,
    /// The log start offset after it.
    pub log_start: Offset,
}

/// True when `log` is at least twice the size of its last snapshot and of a segment,
/// and has a sealed segment a snapshot would free.
pub fn due(log: &PartitionLog, gate: &JournalGate) -> bool {
    let offsets = log.offsets();
    let floor = gate.snapshot_bytes.get().max(log.config().segment_bytes);
    offsets.segments >= 2 && offsets.bytes >= floor.saturating_mul(2)
}

/// The records that restate `state`, behind a snapshot start; refused when a stored
/// transaction state is not the JSON its coordinator wrote.
pub fn records_of(state: SlotState) -> Result<Vec<JournalRecord>, OffsetStoreError> {
    let mut out = vec![JournalRecord::SnapshotStart];
    out.extend(
        state
            .offsets
            .into_iter()
            .map(|(group, offsets)| JournalRecord::Commit {
                group,
                fence: Fence::Reset,
                offsets,
            }),
    );
    out.extend(state.pending.into_iter().map(|(group, producer_id, p)| {
        JournalRecord::TxnOffsets {
            group,
            producer_id,
            producer_epoch: p.producer_epoch,
            v2: p.v2,
            fence: p.fence,
            offsets: p.offsets,
        }
    }));
    for (id, stored) in state.transactions {
        let meta = String::from_utf8(stored)
            .map_err(|e| OffsetStoreError::corrupt_transaction(&id, e))
            .and_then(|text| {
                OpaqueState::from_json(text)
                    .map_err(|e| OffsetStoreError::corrupt_transaction(&id, e))
            })?;
        out.push(JournalRecord::Transaction { id, meta });
    }
    Ok(out)
}

/// Writes a snapshot of the state `store` holds for the names `owns` accepts (those of
/// `journal`'s partition) and moves the log start to it.
pub async fn snapshot(
    journal: &Journal,
    store: &Arc<OffsetStore>,
    owns: impl Fn(&str) -> bool + Send + 'static,
) -> Result<SnapshotReport, JournalError> {
    let log_bytes_before = journal.log.offsets().bytes;
    let held = journal.gate.exclusive().await?;
    let reader = Arc::clone(store);
    let state = glommio::executor()
        .spawn_blocking(move || reader.slot_state(&owns))
        .await?;
    let records = records_of(state)?;
    let batches = encode_batches(&records, SNAPSHOT_BATCH_BYTES, Clock::System.now_ms())?;
    let mut start = None;
    let mut last = None;
    let mut bytes = 0u64;
    for payload in &batches {
        let appended = journal.log.append(payload, journal.epoch).await?;
        start.get_or_insert(appended.base_offset);
        bytes += payload.as_bytes().len() as u64;
        last = Some(appended.durable);
    }
    drop(held);
    if let Some(durable) = last {
        durable.waiting_for(Wait::Committed).await?;
    }
    let start = start.ok_or_else(|| JournalError::Malformed("empty snapshot".into()))?;
    let log_start = journal.log.delete_records(start).await?;
    journal.gate.snapshot_bytes.set(bytes);
    Ok(SnapshotReport {
        records: records.len(),
        bytes,
        log_bytes_before,
        log_start,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::group::{
        journal::{apply_to, decode},
        offset_store::CommittedOffset,
    };

    /// One change a coordinator may journal, over a few groups, topics and producers.
    #[derive(Debug, Clone)]
    enum Change {
        Commit(u8, u8, i64, Option<i32>),
        DeleteOffsets(u8, u8),
        DeleteGroup(u8),
        Pending(u8, u8, i16, bool, u8, i64),
        End(u8, u8, i16, bool),
        Transaction(u8, i16),
        TransactionExpired(u8),
    }

    fn change() -> impl Strategy<Value = Change> {
        prop_oneof![
            (0..4u8, 0..3u8, 0..100i64, proptest::option::of(0..3i32))
                .prop_map(|(g, p, o, gen)| Change::Commit(g, p, o, gen)),
            (0..4u8, 0..3u8).prop_map(|(g, p)| Change::DeleteOffsets(g, p)),
            (0..4u8).prop_map(Change::DeleteGroup),
            (0..4u8, 0..2u8, 0..3i16, any::<bool>(), 0..3u8, 0..100i64)
                .prop_map(|(g, pid, e, v2, p, o)| Change::Pending(g, pid, e, v2, p, o)),
            (0..4u8, 0..2u8, 0..4i16, any::<bool>())
                .prop_map(|(g, pid, e, c)| Change::End(g, pid, e, c)),
            (0..4u8, 0..5i16).prop_map(|(id, epoch)| Change::Transaction(id, epoch)),
            (0..4u8).prop_map(Change::TransactionExpired),
        ]
    }

    fn at(offset: i64, generation: i32) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: -1,
            generation,
            committed_at_ms: 0,
            metadata: format!("m{offset}"),
        }
    }

    fn record(c: &Change) -> JournalRecord {
        let group = |g: &u8| format!("group-{g}");
        match c {
            Change::Commit(g, p, o, gen) => JournalRecord::Commit {
                group: group(g),
                fence: gen.map_or(Fence::Reset, Fence::Generation),
                offsets: vec![("t".into(), u32::from(*p), at(*o, gen.unwrap_or(-1)))],
            },
            Change::DeleteOffsets(g, p) => JournalRecord::DeleteOffsets {
                group: group(g),
                partitions: vec![("t".into(), u32::from(*p))],
            },
            Change::DeleteGroup(g) => JournalRecord::DeleteGroup { group: group(g) },
            Change::Pending(g, pid, epoch, v2, p, o) => JournalRecord::TxnOffsets {
                group: group(g),
                producer_id: i64::from(*pid),
                producer_epoch: *epoch,
                v2: *v2,
                fence: Fence::Generation(1),
                offsets: vec![("t".into(), u32::from(*p), at(*o, 1))],
            },
            Change::End(g, pid, epoch, commit) => JournalRecord::TxnOffsetsEnd {
                group: group(g),
                producer_id: i64::from(*pid),
                producer_epoch: *epoch,
                commit: *commit,
            },
            Change::Transaction(id, epoch) => JournalRecord::Transaction {
                id: format!("txn-{id}"),
                // Opaque here: any JSON its coordinator wrote.
                meta: OpaqueState::encode(
                    &serde_json::json!({"producer_id": id, "producer_epoch": epoch}),
                )
                .expect("json"),
            },
            Change::TransactionExpired(id) => JournalRecord::TransactionExpired {
                id: format!("txn-{id}"),
            },
        }
    }

    fn apply_all(store: &OffsetStore, records: &[JournalRecord]) {
        apply_to(store, records).expect("apply");
    }

    /// Name "group-N" or "txn-N" belongs to the slot when N is even.
    fn owned(name: &str) -> bool {
        name.bytes().last().is_some_and(|b| b % 2 == 0)
    }

    proptest! {
        /// A replica that replays the snapshot's batches into a store holding stale
        /// state for the slot (cleared first, as replay does) ends with exactly what the
        /// leader held, and leaves other slots alone; later changes apply alike.
        #[test]
        fn a_snapshot_restates_the_slot_exactly(
            history in proptest::collection::vec(change(), 0..60),
            stale in proptest::collection::vec(change(), 0..20),
            after in proptest::collection::vec(change(), 0..20),
        ) {
            let dirs = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
            let leader = OffsetStore::open(dirs.0.path(), 1 << 22).expect("store");
            let replica = OffsetStore::open(dirs.1.path(), 1 << 22).expect("store");
            let history: Vec<JournalRecord> = history.iter().map(record).collect();
            apply_all(&leader, &history);
            apply_all(&replica, &stale.iter().map(record).collect::<Vec<_>>());
            let others = replica.slot_state(&|n| !owned(n)).expect("others");

            let state = leader.slot_state(&owned).expect("state");
            let batches = encode_batches(&records_of(state.clone()).expect("records"), 256, 0).expect("encode");
            replica.clear_slot(&owned).expect("clear");
            for b in &batches {
                apply_all(&replica, &decode(b).expect("decode"));
            }
            prop_assert_eq!(replica.slot_state(&owned).expect("replayed"), state);
            prop_assert_eq!(replica.slot_state(&|n| !owned(n)).expect("others"), others);

            let after: Vec<JournalRecord> = after.iter().map(record).collect();
            apply_all(&leader, &after);
            apply_all(&replica, &after);
            prop_assert_eq!(
                replica.slot_state(&owned).expect("replica"),
                leader.slot_state(&owned).expect("leader")
            );
        }
    }
}
