//! One partition's log: an ordered list of segments, the offsets that describe it, and
//! the operations the broker needs (append, read, offset lookups, retention, close).
//!
//! Offsets, in Kafka's words:
//! - *log start offset*: the first offset still stored;
//! - *high watermark*: one past the last offset known durable (fsynced, or written in
//!   write-only mode). Reads never return anything at or above it, so a consumer never
//!   sees a record a crash could take back;
//! - *log end offset*: one past the last offset appended, durable or not.
//!
//! Durability contract of [`PartitionLog::append`]: when it returns, the batches are in
//! memory with offsets assigned; the [`Durable`] future it hands back resolves `Ok` once
//! the shard's group commit has made them durable and moved the high watermark past
//! them, or fails if the flush failed. After a failed flush the log is *fenced*: reads
//! below the high watermark still work, appends are refused until the log is reopened
//! (which re-reads what actually reached the disk), because a failed fdatasync leaves
//! the file's state unknown and retrying it could report data durable that is not.
//!
//! Shard-local: `!Send`, driven only from its shard's executor.

use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
    path::{Path, PathBuf},
    rc::Rc,
    task::Waker,
};

use glommio::io::Directory;

use crate::semaphore::{Permit, Semaphore};

use super::{
    config::LogConfig,
    error::FenceReason,
    flush::FlushTarget,
    log_env::LogEnv,
    partition_txns::PartitionTxns,
    producer_state::{sequence_after, BatchSequence, ProducerStates},
    record_batch::ProducePayload,
    recovery::RecoveryReport,
    segment::{Segment, SegmentPaths},
    segment_files::{open_dir, sync_dir},
    Offset, Result, StorageError,
};

mod clean_close;
mod close;
mod compaction;
mod compaction_output;
mod compaction_pace;
#[cfg(test)]
mod compaction_tests;
mod delete_records;
mod durable;
mod flush_target;
mod leader_epochs;
mod log_dir;
mod producer_rebuild;
mod read;
#[cfg(test)]
mod recycle_tests;
mod replica;
mod retention;
#[cfg(test)]
mod tests;
mod timestamp_lookup;
#[cfg(test)]
mod transaction_tests;
mod transactions;

pub use compaction::{CompactionReport, Pace, CLEANED_SUFFIX};
pub use delete_records::LOG_START_FILE;
pub use durable::{Durable, Wait};
pub use leader_epochs::{EpochEnd, LeaderEpochs};
pub use log_dir::{claim_dir, topic_id_in, Claim, PARTITION_METADATA_FILE};
pub use read::LogRead;
pub use replica::{cut_log, Truncation};
pub use timestamp_lookup::{TimestampOffset, TimestampQuery};
pub use transactions::{ActiveProducer, Marker, MarkerEnds, StableView, TXN_CHECKPOINT_FILE};

use log_dir::list_segments;
use producer_rebuild::check_sequences;

/// How an append's batches get their offsets and leader epoch.
#[derive(Debug, Clone, Copy)]
enum Stamp {
    /// The leader assigns offsets from the log end and stamps its epoch.
    Leader(i32),
    /// A follower keeps the leader's offsets and epochs, which must continue the log.
    Replica,
}

/// Where an append landed; await [`Appended::durable`] before acknowledging it.
pub struct Appended {
    /// Offset assigned to the first record.
    pub base_offset: Offset,
    /// Offset assigned to the last record.
    pub last_offset: Offset,
    /// Resolves once every record of the append is durable.
    pub durable: Durable,
}

struct LogState {
    segments: VecDeque<Segment>,
    /// Segments out of the log whose files a failure kept from the pool, oldest first.
    unretired: VecDeque<retention::Retired>,
    producers: ProducerStates,
    /// The partition's transactions: open ones, aborted ones, the LSO.
    txns: PartitionTxns,
    log_start: Offset,
    log_end: Offset,
    /// One past the last offset this replica made durable.
    durable_end: Offset,
    /// What replication allows to count as committed (see [`PartitionLog::set_commit_cap`]);
    /// `None` for a partition that is not replicated: durable here is committed.
    commit_cap: Option<Offset>,
    high_watermark: Offset,
    /// Where every leader epoch in the log starts.
    epochs: LeaderEpochs,
    /// Bumped when this replica stops leading: appends waiting to be committed then
    /// fail, since the new leader may not keep them.
    step_downs: u64,
    fenced: Option<FenceReason>,
    closed: bool,
    /// Appends waiting for `durable_end` or the high watermark, by target offset.
    waiters: VecDeque<(Offset, Waker)>,
    /// Sealed segments below this offset were compacted by a pass since the log opened.
    cleaned_to: Offset,
    /// When the oldest tombstone or transaction marker compaction kept is due to go,
    /// if any.
    removals_due: Option<i64>,
    /// Bytes appended since the transactions were last checkpointed, and whether a
    /// checkpoint inside the segment is being written (see `transactions.rs`).
    txn_checkpoint_bytes: u64,
    txn_checkpoint_writing: bool,
}

impl LogState {
    /// Moves the high watermark to what durability and replication allow, never back.
    fn advance_high_watermark(&mut self) {
        let allowed = match self.commit_cap {
            Some(cap) => self.durable_end.min(cap),
            None => self.durable_end,
        };
        self.high_watermark = self.high_watermark.max(allowed);
        self.txns.settle(self.high_watermark);
    }

    /// Wakers of the appends that may have become durable or committed.
    fn ready_waiters(&mut self) -> Vec<Waker> {
        let ready = self
            .waiters
            .partition_point(|(t, _)| *t <= self.durable_end);
        self.waiters.drain(..ready).map(|(_, w)| w).collect()
    }
}

struct LogShared {
    dir: PathBuf,
    /// `dir`, open for the flush round's fdatasync of new segments' names.
    dir_handle: Rc<Directory>,
    /// Settings in force; [`PartitionLog::set_config`] changes them while the log is open.
    config: RefCell<LogConfig>,
    env: LogEnv,
    state: RefCell<LogState>,
    append_lock: Semaphore,
    /// Held while segment files are swapped or deleted (compaction, retention,
    /// DeleteRecords, close), so no two of them touch one segment's files at once.
    maintenance: Semaphore,
    queued: Cell<bool>,
}

/// A partition's log on this shard. Cloning shares it.
#[derive(Clone)]
pub struct PartitionLog {
    shared: Rc<LogShared>,
}

/// A summary of the log's offsets and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOffsets {
    /// First offset still stored.
    pub log_start: Offset,
    /// One past the last durable offset.
    pub high_watermark: Offset,
    /// One past the last appended offset.
    pub log_end: Offset,
    /// Segments on disk.
    pub segments: usize,
    /// Bytes across all segments.
    pub bytes: u64,
}

impl PartitionLog {
    /// Opens the log in `dir`, creating it when empty, and recovers every segment (see
    /// `recovery`). A segment cut short before the next one's base offset makes every
    /// later segment unreachable, so those are deleted: offsets stay dense. Everything
    /// that survives is fdatasynced before the log is returned (the active segment's
    /// log, and the directory: a crashed process may have left names not yet durable),
    /// so it all starts below the high watermark.
    pub async fn open(
        env: LogEnv,
        dir: &Path,
        config: LogConfig,
    ) -> Result<(PartitionLog, Vec<RecoveryReport>)> {
        config.validate()?;
        let now = env.clock.now_ms();
        let bases = list_segments(dir).await?;
        // Read and removed (durably) before anything else: see `clean_close`.
        let clean = clean_close::take(dir).await?;
        let clean = clean.filter(|c| bases.last() == Some(&c.base));
        env.pool.adopt(dir).await?;
        let mut segments: VecDeque<Segment> = VecDeque::new();
        let mut reports = Vec::new();
        let mut doomed = Vec::new();
        for (i, base) in bases.iter().enumerate() {
            let follows = segments
                .back()
                .is_none_or(|prev| prev.next_offset() == *base);
            // A segment cut short is fine when the next one still follows it: what was
            // cut lay past its last batch (a torn write, a recycled file's stale tail).
            if !follows {
                tracing::warn!(dir = %dir.display(), base = base.0, "deleting segment after a gap in the log");
                doomed.extend(bases[i..].iter().copied());
                break;
            }
            let clean_end = clean.filter(|c| c.base == *base).map(|c| c.end);
            let (segment, report) = Segment::open(dir, *base, &config, now, clean_end).await?;
            env.metrics.recovered_segments.inc();
            env.metrics.truncated_bytes.inc_by(report.truncated_bytes);
            reports.push(report);
            segments.push_back(segment);
        }
        for base in doomed {
            Segment::delete_files(SegmentPaths::new(dir, base)).await?;
        }
        compaction::remove_leftovers(dir).await?;
        let dir_handle = open_dir(dir).await?;
        match segments.back_mut() {
            Some(active) => {
                active.activate(&config, &env.zero_fill).await?;
                // Only the segment the record names can have kept its tail.
                let kept = reports.last().map_or(0, |r| r.kept_tail_bytes);
                if let Some(c) = clean.filter(|_| kept > 0) {
                    active.assume_written(c.written_end.min(active.size() + kept));
                }
                active.sync_log().await?;
                sync_dir(&dir_handle, dir).await?;
            }
            None => {
                segments.push_back(
                    Segment::create(
                        dir,
                        Offset(0),
                        &config,
                        now,
                        &env.zero_fill,
                        Some(&env.pool),
                    )
                    .await?,
                );
            }
        }
        let log_end = segments.back().map_or(Offset(0), Segment::next_offset);
        // DeleteRecords may have moved the start past the first segment's base.
        let recorded = delete_records::read_log_start(dir).await?;
        let log_start = segments
            .front()
            .map_or(Offset(0), Segment::base)
            .max(recorded.unwrap_or(Offset(0)).min(log_end));
        let shared = Rc::new(LogShared {
            dir: dir.to_path_buf(),
            dir_handle,
            config: RefCell::new(config),
            env,
            state: RefCell::new(LogState {
                segments,
                unretired: VecDeque::new(),
                producers: ProducerStates::default(),
                txns: PartitionTxns::default(),
                log_start,
                log_end,
                durable_end: log_end,
                commit_cap: None,
                high_watermark: log_end,
                epochs: LeaderEpochs::default(),
                step_downs: 0,
                fenced: None,
                closed: false,
                waiters: VecDeque::new(),
                cleaned_to: Offset(0),
                removals_due: None,
                txn_checkpoint_bytes: 0,
                txn_checkpoint_writing: false,
            }),
            append_lock: Semaphore::new(1),
            maintenance: Semaphore::new(1),
            queued: Cell::new(false),
        });
        let log = PartitionLog { shared };
        log.load_epochs().await?;
        log.rebuild_producer_states().await?;
        log.rebuild_transactions().await?;
        Ok((log, reports))
    }

    /// Changes the log's settings while it is open (a topic's configs were altered):
    /// segment size and age apply from the next append, retention from its next run;
    /// growth and index settings from the next segment.
    pub fn set_config(&self, config: LogConfig) -> Result<()> {
        config.validate()?;
        *self.shared.config.borrow_mut() = config;
        Ok(())
    }

    /// The settings in force.
    pub fn config(&self) -> LogConfig {
        self.shared.config.borrow().clone()
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Log start offset, high watermark, log end offset and size.
    pub fn offsets(&self) -> LogOffsets {
        let st = self.shared.state.borrow();
        LogOffsets {
            log_start: st.log_start,
            high_watermark: st.high_watermark,
            log_end: st.log_end,
            segments: st.segments.len(),
            bytes: st.segments.iter().map(Segment::size).sum(),
        }
    }

    /// The first offset still stored.
    pub fn log_start_offset(&self) -> Offset {
        self.shared.state.borrow().log_start
    }

    /// One past the last durable offset.
    pub fn high_watermark(&self) -> Offset {
        self.shared.state.borrow().high_watermark
    }

    /// Why the log refuses appends, if it does.
    pub fn fenced(&self) -> Option<FenceReason> {
        self.shared.state.borrow().fenced.clone()
    }

    fn refuse(&self, st: &LogState) -> Result<()> {
        if st.closed {
            return Err(StorageError::Closed(self.shared.dir.clone()));
        }
        if let Some(reason) = &st.fenced {
            return Err(StorageError::Fenced {
                path: self.shared.dir.clone(),
                reason: reason.clone(),
            });
        }
        Ok(())
    }

    /// Appends every batch of `payload` in order with dense offsets and stamps each with
    /// `leader_epoch`, rolling to a new segment first when the active one is full or too
    /// old. In memory when this returns; see the module docs for [`Durable`].
    /// Concurrent appends are serialised in call order.
    pub async fn append(&self, payload: &ProducePayload, leader_epoch: i32) -> Result<Appended> {
        self.append_as(payload, Stamp::Leader(leader_epoch)).await
    }

    async fn append_as(&self, payload: &ProducePayload, stamp: Stamp) -> Result<Appended> {
        let permit = self.lock_appends().await?;
        self.append_holding(&permit, payload, stamp).await
    }

    /// [`append_as`](Self::append_as) with the append lock held: what the caller
    /// checked under it still holds when the batches are stored.
    async fn append_holding(
        &self,
        _permit: &Permit<'_>,
        payload: &ProducePayload,
        stamp: Stamp,
    ) -> Result<Appended> {
        let shared = &self.shared;
        let count = payload.offset_count();
        let roll = {
            let st = shared.state.borrow();
            self.refuse(&st)?;
            if let Stamp::Replica = stamp {
                let first = payload.batches().next().map_or(-1, |b| b.base_offset());
                if first != st.log_end.to_wire() {
                    return Err(StorageError::NotContiguous {
                        path: shared.dir.clone(),
                        offset: first,
                        log_end: st.log_end,
                    });
                }
            } else if let Some(duplicate) = check_sequences(&st.producers, payload)
                .inspect_err(|e| {
                    // Rare and telling after a failover: kept in the host's log.
                    tracing::info!(log = %shared.dir.display(), log_end = st.log_end.0, error = %e, "refused an idempotent producer's batch");
                })?
            {
                // A retry of a stored batch: its original offsets, durable when they are.
                tracing::info!(log = %shared.dir.display(), base_offset = duplicate.0 .0, "a retried batch answered with its original offsets");
                return Ok(Appended {
                    base_offset: duplicate.0,
                    last_offset: duplicate.1,
                    durable: self.durable(&st, Offset(duplicate.1 .0 + 1)),
                });
            }
            if st
                .log_end
                .0
                .checked_add(count)
                .is_none_or(|end| end > i64::MAX as u64)
            {
                return Err(StorageError::OffsetOverflow(shared.dir.clone()));
            }
            let active = st
                .segments
                .back()
                .expect("a log always has an active segment");
            let now = shared.env.clock.now_ms();
            let config = shared.config.borrow();
            let too_old = config
                .segment_age_max
                .is_some_and(|age| now - active.created_ms >= age.as_millis() as i64);
            active.size() > 0
                && (active.size() + payload.total_bytes() as u64 > config.segment_bytes
                    || too_old
                    || active.offsets_left() < count)
        };
        if roll {
            self.roll().await?;
        }
        self.begin_epochs(payload, stamp).await?;
        let mut st = shared.state.borrow_mut();
        self.refuse(&st)?;
        let base_offset = st.log_end;
        let mut next = base_offset;
        // Markers are read before anything is stored, so a malformed one stores nothing
        // (and an append without markers allocates nothing for it).
        for batch in payload.batches().filter(|b| b.is_control()) {
            transactions::txn_batch(&batch)?;
        }
        let LogState {
            segments,
            producers,
            txns,
            ..
        } = &mut *st;
        let active = segments.back_mut().expect("active segment");
        for batch in payload.batches() {
            let epoch = match stamp {
                Stamp::Leader(epoch) => epoch,
                Stamp::Replica => batch.partition_leader_epoch(),
            };
            if let Stamp::Replica = stamp {
                // A leader's batches are dense; anything else is refused before storing.
                if batch.base_offset() != next.to_wire() {
                    drop(st);
                    return Err(StorageError::NotContiguous {
                        path: shared.dir.clone(),
                        offset: batch.base_offset(),
                        log_end: next,
                    });
                }
            }
            active.append(&batch, next, epoch);
            let last = Offset(next.0 + batch.offset_count() - 1);
            // Checked above: a marker here is well formed.
            if let Ok(Some(kind)) = transactions::txn_batch(&batch) {
                txns.record(batch.producer_id(), kind, next, last);
            }
            if batch.is_control() {
                producers.fence(batch.producer_id(), batch.producer_epoch());
            } else if batch.producer_id() >= 0 {
                producers.record(
                    batch.producer_id(),
                    batch.producer_epoch(),
                    BatchSequence {
                        first: batch.base_sequence(),
                        last: sequence_after(batch.base_sequence(), batch.last_offset_delta()),
                        base_offset: next,
                        last_offset: last,
                        max_timestamp: batch.max_timestamp(),
                    },
                );
            }
            next = Offset(last.0 + 1);
        }
        st.log_end = next;
        let durable = self.durable(&st, next);
        let checkpoint = self.txn_checkpoint_due(&mut st, payload.total_bytes() as u64);
        drop(st);
        if let Some((checkpoint, written)) = checkpoint {
            self.checkpoint_when_durable(checkpoint, written);
        }
        self.enqueue_flush(payload.total_bytes() as u64);
        Ok(Appended {
            base_offset,
            last_offset: Offset(next.0 - 1),
            durable,
        })
    }

    /// The future that waits for offsets below `target` to be committed.
    fn durable(&self, st: &LogState, target: Offset) -> Durable {
        Durable {
            log: Rc::clone(&self.shared),
            target,
            wait: Wait::Committed,
            step_downs: st.step_downs,
        }
    }

    /// Records, durably, where the payload's new leader epochs begin (a leader's one
    /// epoch at the log end, or each epoch a replicated payload brings). Called with the
    /// append lock held.
    async fn begin_epochs(&self, payload: &ProducePayload, stamp: Stamp) -> Result<()> {
        let changed = {
            let st = self.shared.state.borrow();
            let mut epochs = st.epochs.clone();
            let changed = match stamp {
                Stamp::Leader(epoch) => epochs.observe(epoch, st.log_end),
                Stamp::Replica => payload.batches().fold(false, |changed, b| {
                    let start = Offset(b.base_offset().max(0) as u64);
                    epochs.observe(b.partition_leader_epoch(), start) || changed
                }),
            };
            changed.then_some(epochs)
        };
        if let Some(epochs) = changed {
            self.save_epochs(epochs.clone()).await?;
            self.shared.state.borrow_mut().epochs = epochs;
        }
        Ok(())
    }

    /// Serialises appends (and close) in call order; held across a roll's file creation.
    async fn lock_appends(&self) -> Result<Permit<'_>> {
        self.shared
            .append_lock
            .acquire_permit(1)
            .await
            .map_err(|_| StorageError::Closed(self.shared.dir.clone()))
    }

    /// Serialises work that swaps or deletes segment files (see `LogShared::maintenance`).
    async fn lock_maintenance(&self) -> Result<Permit<'_>> {
        self.shared
            .maintenance
            .acquire_permit(1)
            .await
            .map_err(|_| StorageError::Closed(self.shared.dir.clone()))
    }

    /// fdatasyncs the log's directory (see [`sync_dir`]).
    async fn sync_dir(&self) -> Result<()> {
        sync_dir(&self.shared.dir_handle, &self.shared.dir).await
    }

    fn enqueue_flush(&self, bytes: u64) {
        let shared = &self.shared;
        let flusher = &shared.env.flusher;
        if !shared.queued.replace(true) {
            flusher.enqueue(Rc::clone(shared) as Rc<dyn FlushTarget>);
        }
        flusher.add_dirty_bytes(bytes);
    }

    async fn roll(&self) -> Result<()> {
        let shared = &self.shared;
        let base = shared.state.borrow().log_end;
        let now = shared.env.clock.now_ms();
        let config = shared.config.borrow().clone();
        let env = &shared.env;
        let segment = Segment::create(
            &shared.dir,
            base,
            &config,
            now,
            &env.zero_fill,
            Some(&env.pool),
        )
        .await?;
        {
            let mut st = shared.state.borrow_mut();
            st.segments
                .back_mut()
                .expect("active segment")
                .start_sealing();
            st.segments.push_back(segment);
        }
        self.enqueue_flush(0);
        self.checkpoint_transactions(base).await
    }

    fn wake_waiters(&self) {
        let waiters = std::mem::take(&mut self.shared.state.borrow_mut().waiters);
        for (_, w) in waiters {
            w.wake();
        }
    }
}
