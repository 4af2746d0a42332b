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
    future::Future,
    path::{Path, PathBuf},
    pin::Pin,
    rc::Rc,
    task::{Context, Poll, Waker},
};

use bytes::Bytes;
use futures_util::future::try_join_all;
use glommio::sync::Semaphore;

use super::{
    batch_cache::SegmentKey,
    config::LogConfig,
    error::FenceReason,
    flush::{FlushTarget, PendingFlush},
    producer_state::{sequence_after, BatchSequence, ProducerStates, SequenceCheck, SequenceError},
    record_batch::ProducePayload,
    recovery::RecoveryReport,
    segment::{Seal, Segment, SegmentFlush, SegmentPaths},
    segment_index::NO_TIMESTAMP,
    segment_reader::{SegmentReader, SCAN_WINDOW_BYTES, WALK_WINDOW_BYTES},
    shard_storage::ShardStorage,
    FilePosition, Offset, Result, StorageError,
};

/// Which offset [`PartitionLog::offset_for_timestamp`] should find (ListOffsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampQuery {
    /// The log start offset (Kafka's -2).
    Earliest,
    /// The high watermark (Kafka's -1).
    Latest,
    /// The batch holding the largest timestamp (Kafka's -3).
    MaxTimestamp,
    /// The first batch whose max timestamp is at or after this many ms since the epoch.
    At(i64),
}

/// An answer to [`PartitionLog::offset_for_timestamp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// The offset found.
    pub offset: Offset,
    /// The timestamp that goes with it, or -1 for `Earliest`/`Latest`.
    pub timestamp: i64,
}

/// What a read returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRead {
    /// Whole stored batches, exactly as stored; empty at the high watermark.
    pub records: Bytes,
    /// The high watermark when the read began.
    pub high_watermark: Offset,
    /// The log start offset when the read began.
    pub log_start_offset: Offset,
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
    producers: ProducerStates,
    log_start: Offset,
    log_end: Offset,
    high_watermark: Offset,
    fenced: Option<FenceReason>,
    closed: bool,
    waiters: VecDeque<(Offset, Waker)>,
}

struct LogShared {
    id: u64,
    dir: PathBuf,
    config: LogConfig,
    storage: ShardStorage,
    state: RefCell<LogState>,
    append_lock: Semaphore,
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

fn parse_segment_name(name: &str) -> Option<Offset> {
    let stem = name.strip_suffix(".log")?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().map(Offset)
}

async fn list_segments(dir: &Path) -> Result<Vec<Offset>> {
    let dir = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            std::fs::create_dir_all(&dir).map_err(|e| StorageError::io("create dir", &dir, e))?;
            let mut bases = Vec::new();
            for entry in std::fs::read_dir(&dir).map_err(|e| StorageError::io("list", &dir, e))? {
                let entry = entry.map_err(|e| StorageError::io("list", &dir, e))?;
                if let Some(base) = entry.file_name().to_str().and_then(parse_segment_name) {
                    bases.push(base);
                }
            }
            bases.sort();
            Ok(bases)
        })
        .await
}

/// fsyncs a directory so the files just created in it survive a crash. On the
/// blocking pool: glommio's directory handles fail on relative paths.
async fn sync_dir(dir: &Path) -> Result<()> {
    let dir = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            std::fs::File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StorageError::io("fsync dir", &dir, e))
        })
        .await
}

/// Checks an idempotent producer's batches against what the partition stored. Returns
/// the original offsets when the payload is one batch that is already stored.
fn check_sequences(
    producers: &ProducerStates,
    payload: &ProducePayload,
) -> Result<Option<(Offset, Offset)>> {
    let single = payload.batch_count() == 1;
    let mut scratch: Option<ProducerStates> = None;
    for (i, batch) in payload.batches().enumerate() {
        let producer_id = batch.producer_id();
        if producer_id < 0 {
            continue;
        }
        let first = batch.base_sequence();
        let last = sequence_after(first, batch.last_offset_delta());
        let states = scratch.as_ref().unwrap_or(producers);
        match states.check(producer_id, batch.producer_epoch(), first, last)? {
            SequenceCheck::Duplicate {
                base_offset,
                last_offset,
            } if single => return Ok(Some((base_offset, last_offset))),
            SequenceCheck::Duplicate { .. } => {
                return Err(SequenceError::DuplicateInPayload { producer_id }.into())
            }
            SequenceCheck::Append if payload.batch_count() > i + 1 => {
                // Later batches of this payload must continue this one's sequence.
                let s = scratch.get_or_insert_with(|| producers.clone());
                s.record(
                    producer_id,
                    batch.producer_epoch(),
                    BatchSequence {
                        first,
                        last,
                        base_offset: Offset(0),
                        last_offset: Offset(0),
                    },
                );
            }
            SequenceCheck::Append => {}
        }
    }
    Ok(None)
}

/// How much of the log's tail recovery rescans to rebuild idempotent producers' state.
/// Retries arrive within the client's delivery timeout (two minutes by default), so a
/// batch older than this much data is not retried; its producer is treated as new.
const PRODUCER_STATE_SCAN_BYTES: u64 = 64 << 20;

impl PartitionLog {
    /// Opens the log in `dir`, creating it when empty, and recovers every segment (see
    /// `recovery`). A segment that had to be cut short makes every later segment
    /// unreachable, so those are deleted: offsets stay dense. Everything that survives
    /// is fdatasynced before the log is returned, so it all starts below the high
    /// watermark.
    pub async fn open(
        storage: &ShardStorage,
        dir: &Path,
        config: LogConfig,
    ) -> Result<(PartitionLog, Vec<RecoveryReport>)> {
        config.validate()?;
        let now = storage.clock().now_ms();
        let bases = list_segments(dir).await?;
        let mut segments: VecDeque<Segment> = VecDeque::new();
        let mut reports = Vec::new();
        let mut doomed = Vec::new();
        for (i, base) in bases.iter().enumerate() {
            let follows = segments
                .back()
                .is_none_or(|prev| prev.next_offset() == *base);
            let prev_cut = reports
                .last()
                .is_some_and(|r: &RecoveryReport| r.truncated_bytes > 0);
            if !follows || prev_cut {
                tracing::warn!(dir = %dir.display(), base = base.0, "deleting segment after a gap in the log");
                doomed.extend(bases[i..].iter().copied());
                break;
            }
            let (segment, report) = Segment::open(dir, *base, &config, now).await?;
            reports.push(report);
            segments.push_back(segment);
        }
        for base in doomed {
            Segment::delete_files(SegmentPaths::new(dir, base)).await?;
        }
        match segments.back_mut() {
            Some(active) => {
                active.activate(&config).await?;
                active.sync_log().await?;
            }
            None => {
                segments.push_back(Segment::create(dir, Offset(0), &config, now).await?);
                sync_dir(dir).await?;
            }
        }
        let log_start = segments.front().map_or(Offset(0), Segment::base);
        let log_end = segments.back().map_or(Offset(0), Segment::next_offset);
        let shared = Rc::new(LogShared {
            id: storage.next_log_id(),
            dir: dir.to_path_buf(),
            config,
            storage: storage.clone(),
            state: RefCell::new(LogState {
                segments,
                producers: ProducerStates::default(),
                log_start,
                log_end,
                high_watermark: log_end,
                fenced: None,
                closed: false,
                waiters: VecDeque::new(),
            }),
            append_lock: Semaphore::new(1),
            queued: Cell::new(false),
        });
        let log = PartitionLog { shared };
        log.rebuild_producer_states().await?;
        Ok((log, reports))
    }

    /// Replays the batch headers of the last [`PRODUCER_STATE_SCAN_BYTES`] of the log
    /// into the producer state table.
    async fn rebuild_producer_states(&self) -> Result<()> {
        let plan: Vec<(SegmentReader, FilePosition)> = {
            let st = self.shared.state.borrow();
            let mut left = PRODUCER_STATE_SCAN_BYTES;
            let mut plan = Vec::new();
            for segment in st.segments.iter().rev() {
                let size = segment.size();
                let from = size.saturating_sub(left);
                // Start at an indexed batch boundary at or before `from`.
                let start = segment
                    .index()
                    .offsets()
                    .entries()
                    .iter()
                    .rev()
                    .map(|e| u64::from(e.position))
                    .find(|&p| p <= from)
                    .unwrap_or(0);
                plan.push((self.reader(segment), FilePosition(start)));
                left = left.saturating_sub(size);
                if left == 0 {
                    break;
                }
            }
            plan.reverse();
            plan
        };
        let mut producers = ProducerStates::default();
        for (reader, start) in plan {
            let seen = RefCell::new(Vec::new());
            reader
                .find(start, SCAN_WINDOW_BYTES, |h| {
                    if h.producer_id >= 0 {
                        seen.borrow_mut().push(*h);
                    }
                    false
                })
                .await?;
            for h in seen.into_inner() {
                producers.record(
                    h.producer_id,
                    h.producer_epoch,
                    BatchSequence {
                        first: h.base_sequence,
                        last: sequence_after(h.base_sequence, h.last_offset_delta),
                        base_offset: Offset(h.base_offset as u64),
                        last_offset: Offset(h.last_offset() as u64),
                    },
                );
            }
        }
        self.shared.state.borrow_mut().producers = producers;
        Ok(())
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
        let shared = &self.shared;
        let _permit = self.lock_appends().await?;
        let count = payload.record_count();
        let roll = {
            let st = shared.state.borrow();
            self.refuse(&st)?;
            if let Some(duplicate) = check_sequences(&st.producers, payload)? {
                // A retry of a stored batch: its original offsets, durable when they are.
                return Ok(Appended {
                    base_offset: duplicate.0,
                    last_offset: duplicate.1,
                    durable: Durable {
                        log: Rc::clone(shared),
                        target: Offset(duplicate.1 .0 + 1),
                    },
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
            let now = shared.storage.clock().now_ms();
            let too_old = shared
                .config
                .segment_age_max
                .is_some_and(|age| now - active.created_ms >= age.as_millis() as i64);
            active.size() > 0
                && (active.size() + payload.total_bytes() as u64 > shared.config.segment_bytes
                    || too_old
                    || active.offsets_left() < count)
        };
        if roll {
            self.roll().await?;
        }
        let mut st = shared.state.borrow_mut();
        self.refuse(&st)?;
        let base_offset = st.log_end;
        let mut next = base_offset;
        let LogState {
            segments,
            producers,
            ..
        } = &mut *st;
        let active = segments.back_mut().expect("active segment");
        for batch in payload.batches() {
            active.append(&batch, next, leader_epoch);
            let last = Offset(next.0 + u64::from(batch.record_count()) - 1);
            if batch.producer_id() >= 0 {
                producers.record(
                    batch.producer_id(),
                    batch.producer_epoch(),
                    BatchSequence {
                        first: batch.base_sequence(),
                        last: sequence_after(batch.base_sequence(), batch.last_offset_delta()),
                        base_offset: next,
                        last_offset: last,
                    },
                );
            }
            next = Offset(last.0 + 1);
        }
        st.log_end = next;
        drop(st);
        self.enqueue_flush(payload.total_bytes() as u64);
        Ok(Appended {
            base_offset,
            last_offset: Offset(next.0 - 1),
            durable: Durable {
                log: Rc::clone(shared),
                target: next,
            },
        })
    }

    /// Serialises appends (and close) in call order; held across a roll's file creation.
    async fn lock_appends(&self) -> Result<glommio::sync::Permit<'_>> {
        self.shared
            .append_lock
            .acquire_permit(1)
            .await
            .map_err(|_| StorageError::Closed(self.shared.dir.clone()))
    }

    fn enqueue_flush(&self, bytes: u64) {
        let shared = &self.shared;
        let flusher = shared.storage.flusher();
        if !shared.queued.replace(true) {
            flusher.enqueue(Rc::clone(shared) as Rc<dyn FlushTarget>);
        }
        flusher.add_dirty_bytes(bytes);
    }

    async fn roll(&self) -> Result<()> {
        let shared = &self.shared;
        let base = shared.state.borrow().log_end;
        let now = shared.storage.clock().now_ms();
        let segment = Segment::create(&shared.dir, base, &shared.config, now).await?;
        sync_dir(&shared.dir).await?;
        let mut st = shared.state.borrow_mut();
        st.segments
            .back_mut()
            .expect("active segment")
            .start_sealing();
        st.segments.push_back(segment);
        drop(st);
        self.enqueue_flush(0);
        Ok(())
    }

    /// Stored batches starting with the one that contains `offset`, at most `max_bytes`
    /// except that the first batch is always whole (Kafka's fetch rule), never at or past
    /// the high watermark, all from one segment. Fails with `OffsetOutOfRange` outside
    /// `[log start, high watermark]`; at the high watermark the records are empty.
    pub async fn read(&self, offset: Offset, max_bytes: usize) -> Result<LogRead> {
        let mut segment_index = None;
        loop {
            let (reader, start, read) = {
                let st = self.shared.state.borrow();
                if st.closed {
                    return Err(StorageError::Closed(self.shared.dir.clone()));
                }
                let read = LogRead {
                    records: Bytes::new(),
                    high_watermark: st.high_watermark,
                    log_start_offset: st.log_start,
                };
                if offset < st.log_start || offset > st.high_watermark {
                    return Err(StorageError::OffsetOutOfRange {
                        requested: offset,
                        log_start: st.log_start,
                        high_watermark: st.high_watermark,
                    });
                }
                if offset == st.high_watermark {
                    return Ok(read);
                }
                let i = match segment_index {
                    Some(i) => i,
                    None => st.segments.partition_point(|s| s.base() <= offset) - 1,
                };
                let Some(segment) = st.segments.get(i) else {
                    return Ok(read);
                };
                segment_index = Some(i + 1);
                (self.reader(segment), segment.index().lookup(offset), read)
            };
            if let Some(records) = reader
                .read_batches(start, offset.0 as i64, max_bytes)
                .await?
            {
                return Ok(LogRead { records, ..read });
            }
        }
    }

    fn reader(&self, segment: &Segment) -> SegmentReader {
        SegmentReader {
            file: Rc::clone(&segment.log_file),
            path: segment.paths.log.clone(),
            key: SegmentKey {
                log_id: self.shared.id,
                base_offset: segment.base().0,
            },
            cache: self.shared.storage.cache(),
            limit: segment.flushed_size(),
        }
    }

    /// Finds an offset by time, as ListOffsets does. Timestamps resolve to batches: `At`
    /// returns the base offset of the first batch whose max timestamp reaches the target
    /// (records are not decoded), `MaxTimestamp` the last offset of the batch holding the
    /// largest timestamp. Only data below the high watermark is considered; `None` when
    /// nothing qualifies.
    pub async fn offset_for_timestamp(
        &self,
        query: TimestampQuery,
    ) -> Result<Option<TimestampOffset>> {
        let target = match query {
            TimestampQuery::Earliest | TimestampQuery::Latest | TimestampQuery::MaxTimestamp => {
                let st = self.shared.state.borrow();
                let found = match query {
                    TimestampQuery::Earliest => Some(TimestampOffset {
                        offset: st.log_start,
                        timestamp: NO_TIMESTAMP,
                    }),
                    TimestampQuery::Latest => Some(TimestampOffset {
                        offset: st.high_watermark,
                        timestamp: NO_TIMESTAMP,
                    }),
                    _ => st
                        .segments
                        .iter()
                        .map(Segment::index)
                        .filter(|i| {
                            i.max_timestamp() != NO_TIMESTAMP
                                && i.offset_of_max_timestamp() < st.high_watermark
                        })
                        .max_by_key(|i| (i.max_timestamp(), i.offset_of_max_timestamp()))
                        .map(|i| TimestampOffset {
                            offset: i.offset_of_max_timestamp(),
                            timestamp: i.max_timestamp(),
                        }),
                };
                return Ok(found);
            }
            TimestampQuery::At(ts) => ts,
        };
        let mut i = 0;
        loop {
            let (reader, start, from) = {
                let st = self.shared.state.borrow();
                let Some(segment) = st
                    .segments
                    .iter()
                    .skip(i)
                    .find(|s| s.index().max_timestamp() >= target)
                else {
                    return Ok(None);
                };
                i = st
                    .segments
                    .iter()
                    .position(|s| s.base() == segment.base())
                    .map_or(usize::MAX, |p| p + 1);
                let from = segment.index().first_offset_at_or_after(target);
                (self.reader(segment), segment.index().lookup(from), from)
            };
            let found = reader
                .find(start, WALK_WINDOW_BYTES, |h| {
                    h.max_timestamp >= target && h.last_offset() >= from.0 as i64
                })
                .await?;
            if let Some((_, h)) = found {
                return Ok(Some(TimestampOffset {
                    offset: Offset(h.base_offset as u64),
                    timestamp: h.max_timestamp,
                }));
            }
        }
    }

    /// Deletes whole sealed segments from the start of the log that are past
    /// `retention_age_max` (by their largest timestamp, or their creation time when
    /// they hold none) or that keep the log above `retention_bytes_max`. The active
    /// segment is never deleted. Returns how many segments were deleted.
    pub async fn enforce_retention(&self) -> Result<usize> {
        let shared = &self.shared;
        let now = shared.storage.clock().now_ms();
        let doomed: Vec<(SegmentPaths, SegmentKey)> = {
            let mut st = shared.state.borrow_mut();
            let mut total: u64 = st.segments.iter().map(Segment::size).sum();
            let mut n = 0;
            for s in st.segments.iter() {
                if s.is_sealed_or_sealing() && !s.needs_flush() && n + 1 < st.segments.len() {
                    let newest = match s.index().max_timestamp() {
                        NO_TIMESTAMP => s.created_ms,
                        ts => ts,
                    };
                    let expired = shared
                        .config
                        .retention_age_max
                        .is_some_and(|age| now - newest > age.as_millis() as i64);
                    let oversize = shared
                        .config
                        .retention_bytes_max
                        .is_some_and(|max| total - s.size() >= max);
                    if expired || oversize {
                        total -= s.size();
                        n += 1;
                        continue;
                    }
                }
                break;
            }
            let removed: Vec<Segment> = st.segments.drain(..n).collect();
            if let Some(first) = st.segments.front() {
                st.log_start = first.base();
            }
            removed
                .into_iter()
                .map(|s| {
                    (
                        s.paths.clone(),
                        SegmentKey {
                            log_id: shared.id,
                            base_offset: s.base().0,
                        },
                    )
                })
                .collect()
        };
        let n = doomed.len();
        for (paths, key) in doomed {
            shared.storage.cache().remove_segment(key);
            Segment::delete_files(paths).await?;
        }
        Ok(n)
    }

    /// Makes everything appended durable, seals the active segment's files to their
    /// exact lengths and closes the log. Later calls on any clone fail with `Closed`.
    /// A fenced log is closed without flushing, successfully: its failed appends were
    /// already told so.
    pub async fn close(&self) -> Result<()> {
        let shared = &self.shared;
        let _permit = self.lock_appends().await?;
        let end = shared.state.borrow().log_end;
        let flushed = (Durable {
            log: Rc::clone(shared),
            target: end,
        })
        .await;
        let finish = {
            let mut st = shared.state.borrow_mut();
            if st.closed {
                return Ok(());
            }
            st.closed = true;
            match (&flushed, &st.fenced) {
                (Ok(()), None) => st.segments.back_mut().and_then(|active| {
                    active.start_sealing();
                    active.begin_flush()
                }),
                _ => None,
            }
        };
        if let Some((flush, _)) = finish {
            let size = flush.size();
            flush.run(true).await?;
            if let Some(active) = shared.state.borrow_mut().segments.back_mut() {
                active.complete_flush(size, true);
            }
        }
        shared.storage.cache().remove_log(shared.id);
        self.wake_waiters();
        match flushed {
            // The appends that the fence failed were told so; closing itself succeeded.
            Err(StorageError::Fenced { .. }) => Ok(()),
            other => other,
        }
    }

    /// Closes the log and deletes its directory with every segment in it.
    pub async fn delete(&self) -> Result<()> {
        {
            let mut st = self.shared.state.borrow_mut();
            st.closed = true;
        }
        self.shared.storage.cache().remove_log(self.shared.id);
        self.wake_waiters();
        let dir = self.shared.dir.clone();
        glommio::executor()
            .spawn_blocking(move || match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(StorageError::io("remove dir", &dir, e))
                }
                _ => Ok(()),
            })
            .await
    }

    fn wake_waiters(&self) {
        let waiters = std::mem::take(&mut self.shared.state.borrow_mut().waiters);
        for (_, w) in waiters {
            w.wake();
        }
    }
}

impl FlushTarget for LogShared {
    fn begin_flush(self: Rc<Self>) -> Option<PendingFlush> {
        self.queued.set(false);
        let (mut jobs, target) = {
            let mut st = self.state.borrow_mut();
            if st.closed || st.fenced.is_some() {
                return None;
            }
            let mut jobs: Vec<(Offset, SegmentFlush)> = Vec::new();
            let cache = self.storage.cache();
            for segment in st.segments.iter_mut() {
                if let Some((flush, chunks)) = segment.begin_flush() {
                    cache.insert(
                        SegmentKey {
                            log_id: self.id,
                            base_offset: segment.base().0,
                        },
                        &chunks,
                    );
                    jobs.push((segment.base(), flush));
                }
            }
            (jobs, st.log_end)
        };
        if jobs.is_empty() {
            return None;
        }
        let outcomes: Vec<(Offset, u64, bool)> = jobs
            .iter()
            .map(|(b, f)| (*b, f.size(), f.seals()))
            .collect();
        // Sealing runs after the round: the round makes the data durable, the seal only
        // trims and syncs files that recovery would repair anyway.
        let seals: Vec<Seal> = jobs.iter_mut().filter_map(|(_, f)| f.take_seal()).collect();
        let sync_files = jobs.iter().flat_map(|(_, f)| f.sync_files()).collect();
        let written_file = jobs.iter().find_map(|(_, f)| f.written_file());
        // The round's fdatasyncs, after every write of the round, make these durable.
        let write = Box::pin(async move {
            try_join_all(jobs.into_iter().map(|(_, f)| f.run(false)))
                .await
                .map(|_| ())
        });
        let finish = Box::new(move |result: Result<()>| {
            let mut st = self.state.borrow_mut();
            match result {
                Ok(_) => {
                    for (base, size, seals) in outcomes {
                        if let Some(s) = st.segments.iter_mut().find(|s| s.base() == base) {
                            s.complete_flush(size, seals);
                        }
                    }
                    if !seals.is_empty() {
                        glommio::spawn_local(async move {
                            for seal in seals {
                                if let Err(e) = seal.finish().await {
                                    tracing::warn!(error = %e, "sealing a segment failed; recovery trims it on the next start");
                                }
                            }
                        })
                        .detach();
                    }
                    st.high_watermark = st.high_watermark.max(target);
                    let hw = st.high_watermark;
                    let ready = st.waiters.partition_point(|(t, _)| *t <= hw);
                    let woken: Vec<_> = st.waiters.drain(..ready).collect();
                    drop(st);
                    for (_, w) in woken {
                        w.wake();
                    }
                }
                Err(e) => {
                    tracing::error!(dir = %self.dir.display(), error = %e, "flush failed; fencing the partition");
                    st.fenced = e.fence_reason().or(Some(FenceReason {
                        op: "flush",
                        kind: std::io::ErrorKind::Other,
                        raw_os_error: None,
                    }));
                    let woken = std::mem::take(&mut st.waiters);
                    drop(st);
                    for (_, w) in woken {
                        w.wake();
                    }
                }
            }
        });
        Some(PendingFlush {
            write,
            sync_files,
            written_file,
            finish,
        })
    }
}

/// Resolves once the log's high watermark reaches the end of an append, or fails when
/// the log is fenced or closed first.
pub struct Durable {
    log: Rc<LogShared>,
    target: Offset,
}

impl Future for Durable {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut st = self.log.state.borrow_mut();
        if st.high_watermark >= self.target {
            return Poll::Ready(Ok(()));
        }
        if let Some(reason) = &st.fenced {
            return Poll::Ready(Err(StorageError::Fenced {
                path: self.log.dir.clone(),
                reason: reason.clone(),
            }));
        }
        if st.closed {
            return Poll::Ready(Err(StorageError::Closed(self.log.dir.clone())));
        }
        let at = st.waiters.partition_point(|(t, _)| *t <= self.target);
        st.waiters.insert(at, (self.target, cx.waker().clone()));
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{
        failpoint,
        shard_storage::ShardStorageConfig,
        test_support::{run, test_dir},
        Clock, FlushConfig,
    };
    use weir_client::record_batch::build_batch;

    /// Shard storage in `dir` that flushes as soon as it can.
    async fn start_storage(dir: &Path) -> ShardStorage {
        ShardStorage::start(
            ShardStorageConfig {
                data_dir: dir.to_path_buf(),
                flush: FlushConfig {
                    interval: std::time::Duration::ZERO,
                    ..FlushConfig::default()
                },
                cache_bytes_max: 1 << 20,
            },
            Clock::System,
        )
        .await
        .expect("start")
    }

    fn one_batch(seed: u8) -> ProducePayload {
        ProducePayload::validate(Bytes::from(build_batch(3, &[seed; 200], 0)), 1 << 20)
            .expect("valid")
    }

    fn fails_then_fences(step: &'static str, errno: i32) {
        let dir = test_dir();
        run(async move {
            let storage = start_storage(dir.path()).await;
            let path = dir.path().join("t-0");
            let (log, _) = storage
                .open_log(&path, LogConfig::default())
                .await
                .expect("open");
            log.append(&one_batch(1), 0)
                .await
                .expect("append")
                .durable
                .await
                .expect("durable");
            failpoint::arm(step, errno);
            let failed = log
                .append(&one_batch(2), 0)
                .await
                .expect("append is in memory");
            let err = failed.durable.await.expect_err("the flush failed");
            assert!(
                matches!(&err, StorageError::Fenced { reason, .. } if reason.op == step && reason.raw_os_error == Some(errno)),
                "{err}"
            );
            assert!(
                matches!(
                    log.append(&one_batch(3), 0).await,
                    Err(StorageError::Fenced { .. })
                ),
                "no retry-and-pretend"
            );
            assert_eq!(
                log.high_watermark(),
                Offset(3),
                "the failed append never became visible"
            );
            let read = log
                .read(Offset(0), 1 << 20)
                .await
                .expect("reads below the high watermark work");
            assert_eq!(read.records.len(), one_batch(1).total_bytes());
            log.close().await.expect("closing a fenced log");
            let (reopened, _) = storage
                .open_log(&path, LogConfig::default())
                .await
                .expect("reopen");
            let end = reopened.offsets().log_end;
            assert!(
                end == Offset(3) || end == Offset(6),
                "the failed batch is whole or absent: {end}"
            );
            let again = reopened
                .append(&one_batch(4), 0)
                .await
                .expect("appends after reopen");
            assert_eq!(again.base_offset, end);
            again.durable.await.expect("durable after reopen");
            reopened.close().await.expect("close");
            storage.shutdown().await;
        });
    }

    fn idempotent(seq: i32, epoch: i16) -> ProducePayload {
        let b = weir_client::record_batch::build_idempotent_batch(
            3,
            b"idem",
            0,
            weir_client::record_batch::Producer {
                id: 7,
                epoch,
                base_sequence: seq,
            },
        );
        ProducePayload::validate(Bytes::from(b), 1 << 20).expect("valid")
    }

    #[test]
    fn idempotent_retries_are_not_stored_twice_even_after_reopen() {
        let dir = test_dir();
        run(async move {
            let storage = start_storage(dir.path()).await;
            let path = dir.path().join("t-0");
            let (log, _) = storage
                .open_log(&path, LogConfig::default())
                .await
                .expect("open");
            let first = log.append(&idempotent(0, 0), 0).await.expect("append");
            assert_eq!(first.base_offset, Offset(0));
            let retry = log.append(&idempotent(0, 0), 0).await.expect("retry");
            assert_eq!(
                (retry.base_offset, retry.last_offset),
                (Offset(0), Offset(2))
            );
            retry.durable.await.expect("durable with the original");
            assert_eq!(log.offsets().log_end, Offset(3), "stored once");
            let gap = log.append(&idempotent(6, 0), 0).await;
            assert!(matches!(
                gap,
                Err(StorageError::Sequence(SequenceError::OutOfOrder {
                    expected: 3,
                    got: 6,
                    ..
                }))
            ));
            let next = log.append(&idempotent(3, 0), 0).await.expect("in order");
            assert_eq!(next.base_offset, Offset(3));
            next.durable.await.expect("durable");
            log.close().await.expect("close");

            let (reopened, _) = storage
                .open_log(&path, LogConfig::default())
                .await
                .expect("reopen");
            let retry = reopened
                .append(&idempotent(3, 0), 0)
                .await
                .expect("retry after reopen");
            assert_eq!(retry.base_offset, Offset(3), "state rebuilt from the log");
            assert_eq!(reopened.offsets().log_end, Offset(6));
            reopened
                .append(&idempotent(0, 1), 0)
                .await
                .expect("new epoch")
                .durable
                .await
                .expect("durable");
            let zombie = reopened.append(&idempotent(6, 0), 0).await;
            assert!(matches!(
                zombie,
                Err(StorageError::Sequence(SequenceError::StaleEpoch { .. }))
            ));
            reopened.close().await.expect("close");
            storage.shutdown().await;
        });
    }

    #[test]
    fn failed_fdatasync_fences_the_partition_until_reopened() {
        fails_then_fences("fdatasync", 5);
    }

    #[test]
    fn failed_write_fences_the_partition_until_reopened() {
        fails_then_fences("write", 28);
    }
}
