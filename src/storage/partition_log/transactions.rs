//! The log's transactions ([`PartitionTxns`]): fed by every append, rebuilt when the log
//! opens, and read by `read_committed` fetches and ListOffsets.
//!
//! Rebuilding must not rescan a long log: at every roll the log checkpoints its
//! transactions as of the new segment's base, and inside a segment every
//! [`CHECKPOINT_INTERVAL_BYTES`] appended, as of the log end once that end is durable
//! here (temporary file, rename; not synced, so no append waits for an fsync — a
//! checkpoint a crash left empty or torn does not parse and counts as missing). Opening
//! reads the checkpoint and scans only the batches after it, from the position the
//! segment's index gives: after a crash, about that interval of the active segment. A
//! checkpoint past the log's end (the log was cut below it) is not trusted and the whole
//! log is scanned instead, which only a follower cut below its last checkpoint pays, and
//! a log without one (written before checkpoints existed) is scanned whole once.

use std::{path::Path, rc::Rc};

use serde::{Deserialize, Serialize};
use weir_client::record_batch::{control_batch, marker_kind, MARKER_COMMIT};

use super::{durable::Durable, durable::Wait, LogRead, LogState, PartitionLog, Stamp};
use crate::ids::{CoordinatorEpoch, LeaderEpoch, ProducerEpoch, ProducerIdentity};
use crate::storage::{
    batch_records,
    partition_txns::{AbortedTxn, PartitionTxns, TxnBatch},
    producer_state::SequenceError,
    record_batch::{BatchHeader, ProducePayload, RecordBatch},
    segment_reader::{SegmentReader, SCAN_WINDOW_BYTES},
    BatchError, FilePosition, Offset, Result, StorageError,
};

use super::Appended;

/// The checkpoint file in the partition's directory.
pub const TXN_CHECKPOINT_FILE: &str = "transactions.checkpoint";

/// Bytes appended between checkpoints inside a segment: about the most of the active
/// segment an open after a crash scans. Without them a 1 GiB active segment was read
/// whole on every restart (kill -9 with 2 GiB in 8 partitions: 0.9 s to recover before
/// transactions, 3.6 s with the full scan).
const CHECKPOINT_INTERVAL_BYTES: u64 = if cfg!(test) { 8 << 10 } else { 64 << 20 };

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Checkpoint {
    /// Every batch below this offset is reflected in `txns`.
    scanned_to: Offset,
    txns: PartitionTxns,
}

/// What a stored batch does to the partition's transactions, if anything: a marker's
/// kind is read from its one control record.
pub(super) fn txn_batch(batch: &RecordBatch<'_>) -> Result<Option<TxnBatch>> {
    if !batch.is_transactional() || batch.producer_id() < 0 {
        return Ok(None);
    }
    if !batch.is_control() {
        return Ok(Some(TxnBatch::Data));
    }
    let invalid = || StorageError::InvalidBatch(BatchError::InvalidMarker(batch.base_offset()));
    let records = batch_records::records(batch).map_err(|_| invalid())?;
    let kind = records
        .spans
        .first()
        .and_then(|s| records.key(s))
        .and_then(marker_kind)
        .ok_or_else(invalid)?;
    Ok(Some(TxnBatch::Marker {
        commit: kind == MARKER_COMMIT,
    }))
}

/// Which of its producer's transactions a marker may end, by epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerEnds {
    /// One at the marker's epoch or an earlier one: transactions V1's EndTxn, whose
    /// markers carry the transaction's own epoch.
    AtItsEpoch,
    /// Only one at an earlier epoch: the marker's epoch was bumped past its
    /// transaction's (transactions V2's EndTxn, a fencing abort), so a transaction open
    /// here at the marker's epoch is the producer's next one (Kafka's TV2 marker rule).
    /// An open epoch that cannot be bumped any more is ended by a marker at it.
    BeforeItsEpoch,
}

/// A COMMIT or ABORT marker as a transaction's coordinator asks a partition's leader to
/// write it (WriteTxnMarkers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// The producer, at the epoch the marker is written at (a bumped one fences the
    /// producer's older epochs).
    pub producer: ProducerIdentity,
    /// COMMIT or ABORT.
    pub commit: bool,
    /// The coordinator's epoch, so a partition can refuse a stale coordinator's marker.
    pub coordinator_epoch: CoordinatorEpoch,
    /// Which of the producer's transactions the marker may end.
    pub ends: MarkerEnds,
}

#[cfg(test)]
impl Marker {
    /// Producer `id`'s marker at `epoch`, from a coordinator at epoch 0.
    pub(crate) fn of(id: i64, epoch: i16, commit: bool, ends: MarkerEnds) -> Marker {
        Marker {
            producer: ProducerIdentity::new(id, epoch),
            commit,
            coordinator_epoch: CoordinatorEpoch(0),
            ends,
        }
    }
}

/// A producer as a partition knows it (DescribeProducers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    /// The producer id.
    pub id: i64,
    /// Its epoch here.
    pub epoch: i16,
    /// The sequence of its last batch, -1 when unknown.
    pub last_sequence: i32,
    /// Its last batch's max timestamp, -1 when unknown.
    pub last_timestamp: i64,
    /// Where its open transaction begins here, if it has one.
    pub txn_start: Option<Offset>,
}

/// What a `read_committed` reader may read now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StableView {
    /// The last stable offset.
    pub last_stable: Offset,
    /// Aborted transactions with records between the read's offset and the LSO.
    pub aborted: Vec<AbortedTxn>,
}

impl PartitionLog {
    /// The last stable offset: a `read_committed` reader reads nothing at or past it.
    pub fn last_stable_offset(&self) -> Offset {
        let st = self.shared.state.borrow();
        st.txns.last_stable(st.high_watermark)
    }

    /// The LSO and the aborted transactions a `read_committed` fetch from `from` must
    /// be told about.
    pub fn stable_view(&self, from: Offset) -> StableView {
        let st = self.shared.state.borrow();
        let last_stable = st.txns.last_stable(st.high_watermark);
        StableView {
            last_stable,
            aborted: st.txns.aborted_in(from, last_stable).copied().collect(),
        }
    }

    /// What a `read_committed` consumer reads from `offset`: as
    /// [`read`](Self::read), but nothing at or past the last stable offset; with the
    /// LSO, taken when the read began, and the aborted transactions with records in the
    /// batches read (Kafka's upper bound: a fetch near the start of a long log does not
    /// carry the list of every aborted transaction after it).
    pub async fn read_committed(
        &self,
        offset: Offset,
        max_bytes: usize,
    ) -> Result<(LogRead, StableView)> {
        let last_stable = self.last_stable_offset();
        let read = self.read_below(offset, max_bytes, |_| last_stable).await?;
        // Every transaction with a record below the LSO had ended when the read began,
        // so the list taken now, up to the last record read, is the one of that moment.
        let aborted = match read.last_offset {
            Some(last) => {
                let st = self.shared.state.borrow();
                let to = Offset(last.0 + 1).min(last_stable);
                st.txns.aborted_in(offset, to).copied().collect()
            }
            None => Vec::new(),
        };
        Ok((
            read,
            StableView {
                last_stable,
                aborted,
            },
        ))
    }

    /// True when `batch` holds records of an aborted transaction: compaction drops
    /// them, and no aborted record may be the newest of its key.
    pub(super) fn in_aborted_transaction(&self, batch: &RecordBatch<'_>) -> bool {
        batch.is_transactional()
            && !batch.is_control()
            && self.shared.state.borrow().txns.is_aborted(
                batch.producer_id(),
                Offset(batch.base_offset().max(0) as u64),
            )
    }

    /// True when `producer_id` has a transaction open in this partition at `epoch`.
    pub fn in_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        let st = self.shared.state.borrow();
        st.txns.is_open(producer_id) && st.producers.epoch_of(producer_id) == Some(epoch)
    }

    /// Producers with a transaction open in this partition, with its first offset.
    pub fn open_transactions(&self) -> Vec<(i64, Offset)> {
        self.shared.state.borrow().txns.open().collect()
    }

    /// The producers this partition knows, as DescribeProducers reports them.
    pub fn producers(&self) -> Vec<ActiveProducer> {
        let st = self.shared.state.borrow();
        st.producers
            .describe()
            .into_iter()
            .map(
                |(id, epoch, last_sequence, last_timestamp)| ActiveProducer {
                    id,
                    epoch,
                    last_sequence,
                    last_timestamp,
                    txn_start: st.txns.open().find(|(p, _)| *p == id).map(|(_, o)| o),
                },
            )
            .collect()
    }

    /// Writes marker `m`, ending its producer's transaction here, as the leader at
    /// `leader`; await its [`Appended::durable`] before the coordinator counts the
    /// partition done. A marker whose producer epoch is older than the partition's is
    /// refused (a stale coordinator), and so is one `m.ends` says belongs to an earlier
    /// transaction than the one open here; a newer one fences the producer's older
    /// epochs here.
    pub async fn append_marker(&self, m: Marker, leader: LeaderEpoch) -> Result<Appended> {
        let (producer_id, producer_epoch) = (m.producer.id.0, m.producer.epoch.0);
        let now = self.shared.env.clock.now_ms();
        let batch = control_batch(
            producer_id,
            producer_epoch,
            m.commit,
            m.coordinator_epoch.0,
            now,
        );
        let payload = ProducePayload::validate(batch, usize::MAX)?;
        let permit = self.lock_appends().await?;
        if m.ends == MarkerEnds::BeforeItsEpoch {
            let st = self.shared.state.borrow();
            let open_epoch = st
                .producers
                .epoch_of(producer_id)
                .filter(|_| st.txns.is_open(producer_id));
            if let Some(current) =
                open_epoch.filter(|e| producer_epoch <= *e && *e < ProducerEpoch::MAX.0)
            {
                // A marker of the transaction before, delayed: the one open here is the
                // next, which this marker must not end.
                tracing::info!(log = %self.shared.dir.display(), producer_id, epoch = producer_epoch, current, "a marker of an earlier transaction refused");
                return Err(SequenceError::StaleEpoch {
                    producer_id,
                    epoch: producer_epoch,
                    current,
                }
                .into());
            }
        }
        self.append_holding(&permit, &payload, Stamp::Leader(leader.0))
            .await
    }

    /// Rebuilds the transactions from the checkpoint and the batches after it.
    pub(super) async fn rebuild_transactions(&self) -> Result<()> {
        let dir = self.shared.dir.clone();
        let checkpoint = glommio::executor()
            .spawn_blocking(move || read_checkpoint(&dir))
            .await?;
        let (from, mut txns) = {
            let st = self.shared.state.borrow();
            match checkpoint {
                Some(c) if c.scanned_to <= st.log_end => (c.scanned_to, c.txns),
                _ => (st.log_start, PartitionTxns::default()),
            }
        };
        // Each segment after the checkpoint, from the batch its index places `from` in.
        let plan: Vec<(SegmentReader, FilePosition)> = {
            let st = self.shared.state.borrow();
            st.segments
                .iter()
                .filter(|s| s.next_offset() > from)
                .map(|s| {
                    let start = if s.base() < from {
                        s.index().lookup(from)
                    } else {
                        FilePosition(0)
                    };
                    (self.reader(s), start)
                })
                .collect()
        };
        for (reader, start) in plan {
            let seen = std::cell::RefCell::new(Vec::<BatchHeader>::new());
            reader
                .find(start, SCAN_WINDOW_BYTES, |h| {
                    if h.is_transactional() && h.producer_id >= 0 && h.base_offset >= from.to_wire()
                    {
                        seen.borrow_mut().push(*h);
                    }
                    false
                })
                .await?;
            for h in seen.into_inner() {
                let kind = if h.is_control() {
                    self.marker_at(&reader, &h).await?
                } else {
                    TxnBatch::Data
                };
                txns.record(
                    h.producer_id,
                    kind,
                    Offset(h.base_offset as u64),
                    Offset(h.last_offset() as u64),
                );
            }
        }
        let mut st = self.shared.state.borrow_mut();
        let log_start = st.log_start;
        txns.forget_below(log_start);
        st.txns = txns;
        Ok(())
    }

    /// The kind of the marker whose header is `h`.
    async fn marker_at(&self, reader: &SegmentReader, h: &BatchHeader) -> Result<TxnBatch> {
        let bytes = reader
            .read_batches(FilePosition(0), h.base_offset, h.base_offset + 1, 1)
            .await?
            .map(|b| b.bytes)
            .unwrap_or_default();
        let (batch, _) = RecordBatch::validate_stored(&bytes, usize::MAX)?;
        txn_batch(&batch)?.ok_or(StorageError::InvalidBatch(BatchError::InvalidMarker(
            h.base_offset,
        )))
    }

    /// Checkpoints the transactions as of `scanned_to`, the base of the segment just
    /// rolled to (nothing is stored at or past it yet). Called with the append lock held.
    pub(super) async fn checkpoint_transactions(&self, scanned_to: Offset) -> Result<()> {
        let txns = {
            let mut st = self.shared.state.borrow_mut();
            st.txn_checkpoint_bytes = 0;
            st.txns.clone()
        };
        let dir = self.shared.dir.clone();
        glommio::executor()
            .spawn_blocking(move || write_checkpoint(&dir, &Checkpoint { scanned_to, txns }, "tmp"))
            .await
    }

    /// After an append of `bytes` (append lock held): once [`CHECKPOINT_INTERVAL_BYTES`]
    /// were appended since the last checkpoint, the transactions as of the log end, and
    /// what resolves when that end is durable here. None while one is being written.
    pub(super) fn txn_checkpoint_due(
        &self,
        st: &mut LogState,
        bytes: u64,
    ) -> Option<(Checkpoint, Durable)> {
        st.txn_checkpoint_bytes += bytes;
        if st.txn_checkpoint_bytes < CHECKPOINT_INTERVAL_BYTES || st.txn_checkpoint_writing {
            return None;
        }
        st.txn_checkpoint_bytes = 0;
        st.txn_checkpoint_writing = true;
        let checkpoint = Checkpoint {
            scanned_to: st.log_end,
            txns: st.txns.clone(),
        };
        Some((
            checkpoint,
            self.durable(st, st.log_end).waiting_for(Wait::Local),
        ))
    }

    /// Writes `checkpoint` once `durable` resolves — never ahead of what a crash keeps —
    /// or gives it up when the log is closed or fenced first. Detached: no append waits.
    pub(super) fn checkpoint_when_durable(&self, checkpoint: Checkpoint, durable: Durable) {
        let shared = Rc::clone(&self.shared);
        glommio::spawn_local(async move {
            if durable.await.is_ok() {
                let dir = shared.dir.clone();
                let written = glommio::executor()
                    .spawn_blocking(move || write_checkpoint(&dir, &checkpoint, "periodic.tmp"))
                    .await;
                if let Err(e) = written {
                    tracing::warn!(error = %e, "transactions checkpoint not written: the next open scans further back");
                }
            }
            shared.state.borrow_mut().txn_checkpoint_writing = false;
        })
        .detach();
    }
}

fn read_checkpoint(dir: &Path) -> Result<Option<Checkpoint>> {
    let path = dir.join(TXN_CHECKPOINT_FILE);
    match std::fs::read(&path) {
        // An unreadable checkpoint is rebuilt from the whole log, like a missing one.
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StorageError::io("read", &path, e)),
    }
}

/// Writes `checkpoint` through a temporary file named with `suffix` (the roll's and the
/// periodic writer's differ, so the two never write one file at once) and a rename.
fn write_checkpoint(dir: &Path, checkpoint: &Checkpoint, suffix: &str) -> Result<()> {
    use std::io::Write;
    let path = dir.join(TXN_CHECKPOINT_FILE);
    let tmp = dir.join(format!("{TXN_CHECKPOINT_FILE}.{suffix}"));
    let bytes = serde_json::to_vec(checkpoint)
        .map_err(|e| StorageError::io("encode", &path, std::io::Error::other(e)))?;
    let mut file = std::fs::File::create(&tmp).map_err(|e| StorageError::io("create", &tmp, e))?;
    file.write_all(&bytes)
        .map_err(|e| StorageError::io("write", &tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| StorageError::io("rename", &path, e))?;
    Ok(())
}
