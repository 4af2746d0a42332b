//! One segment of a partition log: the `.log` file of batches starting at the base
//! offset in its name, its `.index` and `.timeindex`, and their in-memory state.
//!
//! A segment is *active* (appends go to it), *sealing* (rolled, waiting for the flush
//! that writes its last bytes, cuts the log past a long tail — see [`Seal`] — and
//! fsyncs all three files) or *sealed*
//! (read-only). Only the log's flushed prefix is ever read.

use std::{path::Path, rc::Rc};

use glommio::io::DmaFile;

pub use super::segment_files::{open_dma, SegmentPaths};
use super::{
    config::{FileGrowth, LogConfig},
    flush::SyncFile,
    record_batch::RecordBatch,
    recovery::{self, RecoveryReport},
    segment_appender::{Chunk, FlushWrite, SegmentAppender, ZeroFillSlot},
    segment_files::remove_if_present,
    segment_index::{IndexedBatch, NewEntries, OffsetIndex, SegmentIndex, TimeIndex},
    segment_pool::{delete_paced, SegmentPool},
    FilePosition, Offset, Result, StorageError,
};

pub(crate) struct SegmentWriter {
    pub(crate) log: SegmentAppender,
    pub(crate) index: SegmentAppender,
    pub(crate) time_index: SegmentAppender,
}

/// Where a segment is in its life (see the module docs), with its writers while it
/// has any.
pub(crate) enum Phase {
    /// Appends go here.
    Active(SegmentWriter),
    /// Rolled: the next flush writes what is left and seals the files.
    Sealing(SegmentWriter),
    /// A flush took the seal: it holds everything left to write, and a round begun
    /// before it finishes (rounds are pipelined) leaves the segment alone.
    SealTaken(SegmentWriter),
    /// Read-only.
    Sealed,
}

impl Phase {
    fn writer_mut(&mut self) -> Option<&mut SegmentWriter> {
        match self {
            Phase::Active(w) | Phase::Sealing(w) | Phase::SealTaken(w) => Some(w),
            Phase::Sealed => None,
        }
    }

    /// Replaces this phase with what `next` makes of it.
    fn advance(&mut self, next: impl FnOnce(Phase) -> Phase) {
        let phase = std::mem::replace(self, Phase::Sealed);
        *self = next(phase);
    }
}

/// State of one segment; see the module docs.
pub struct Segment {
    pub(crate) base: Offset,
    pub(crate) paths: SegmentPaths,
    pub(crate) log_file: Rc<DmaFile>,
    pub(crate) phase: Phase,
    pub(crate) index: SegmentIndex,
    pub(crate) next_offset: Offset,
    pub(crate) size: u64,
    pub(crate) flushed_size: u64,
    pub(crate) created_ms: i64,
    /// False from [`Segment::create`] until a flush round has fdatasynced the directory
    /// after the files were named: until then a crash may lose their names.
    pub(crate) named_durably: bool,
}

/// A segment's part of one group commit.
pub struct SegmentFlush {
    log: Option<FlushWrite>,
    index: Option<FlushWrite>,
    time_index: Option<FlushWrite>,
    seal: Option<Seal>,
    size: u64,
    names: bool,
}

/// What sealing a segment still has to do once its data is durable: fdatasync its
/// files, cutting the log to its exact length only when what lies past its data
/// (zero-fill, a recycled file's stale bytes) is more than [`SEAL_TAIL_KEPT`] or an
/// eighth of the data: a small tail stays, because cutting it frees blocks — a trim on
/// a discard-mounted disk — that the file would need again once recycled (it would be
/// zero-filled anew past its end). Index files are never cut: past their entries they
/// hold only zeros (a page's padding, a recycled file's zeroed rest), which end an
/// index when it is read. Nothing acknowledged depends on the seal — recovery treats a
/// zero or stale tail and padded index files alike, ending the log at its last batch —
/// so a group commit does not wait for it (see [`SegmentFlush::take_seal`]).
pub struct Seal {
    log: Rc<DmaFile>,
    index: Rc<DmaFile>,
    time_index: Rc<DmaFile>,
    paths: SegmentPaths,
    log_bytes: u64,
    /// Never cut the log (a clean close: see `partition_log::clean_close`).
    keep_tail: bool,
}

/// Most bytes past a sealed log's data that sealing leaves in place (the recycle pool's
/// oversize bound: a file that much larger still serves a segment of the same size).
/// A tail is also cut when it is more than an eighth of the data, so a segment rolled
/// early (by age) does not keep a large recycled file's worth of disk.
pub const SEAL_TAIL_KEPT: u64 = 8 << 20;

impl Seal {
    /// Cuts the log when its tail is too long to keep (see [`SEAL_TAIL_KEPT`]) and
    /// fdatasyncs all three files at once.
    pub async fn finish(self) -> Result<()> {
        let log_len = self
            .log
            .file_size()
            .await
            .map_err(|e| StorageError::io("stat", &self.paths.log, e))?;
        let tail = log_len.saturating_sub(self.log_bytes);
        let log = async {
            if !self.keep_tail && tail > SEAL_TAIL_KEPT.min(self.log_bytes / 8) {
                cut(&self.log, &self.paths.log, self.log_bytes).await
            } else {
                sync(&self.log, &self.paths.log).await
            }
        };
        let ((log, index), time_index) = futures_lite::future::zip(
            futures_lite::future::zip(log, sync(&self.index, &self.paths.index)),
            sync(&self.time_index, &self.paths.time_index),
        )
        .await;
        log?;
        index?;
        time_index
    }
}

async fn cut(file: &DmaFile, path: &Path, len: u64) -> Result<()> {
    file.truncate(len)
        .await
        .map_err(|e| StorageError::io("truncate", path, e))?;
    sync(file, path).await
}

async fn sync(file: &DmaFile, path: &Path) -> Result<()> {
    file.fdatasync()
        .await
        .map_err(|e| StorageError::io("fdatasync", path, e))
}

/// An index file is written once a page of new entries has accumulated (and whole when
/// the segment seals), not at every flush: indexes are derived data that recovery
/// rebuilds from the log past the last entry on disk (at most a page of entries, ~2 MiB
/// of log), while writing their tail pages at every flush cost each touched partition
/// two more device writes per round — measured with 200 partitions at 100 msgs/s, where
/// rounds touch many partitions with a few records each.
const INDEX_FLUSH_BYTES: usize = 4096;

/// Pace of [`Segment::delete_files`]: the log shrinks in small steps rather than being
/// unlinked whole. Freeing a whole segment at once makes a file system mounted with
/// online discard (`-o discard`, common on cloud disks) issue one large TRIM that stalls
/// the device: measured on this project's disk, unlinking a 256 MiB segment took 53 ms
/// and held up concurrent durable produces by 200–380 ms.
const DELETE_RATE: u64 = 800 << 20;

fn index_due(index: &SegmentAppender) -> bool {
    index.dirty_bytes() >= INDEX_FLUSH_BYTES
}

impl Segment {
    /// Opens the segment with base offset `base` in `dir`, recovering what a crash left
    /// behind (see [`recovery`]): the log is cut after its last intact batch — unless
    /// the segment is as a clean close left it (`clean_end`) — and the indexes
    /// rebuilt from it when they disagree. It opens sealed; [`Segment::activate`]
    /// reopens it for appends.
    pub async fn open(
        dir: &Path,
        base: Offset,
        config: &LogConfig,
        now_ms: i64,
        clean_end: Option<recovery::CleanEnd>,
    ) -> Result<(Segment, RecoveryReport)> {
        let paths = SegmentPaths::new(dir, base);
        let log_file = open_dma(&paths.log).await?;
        let recovered = recovery::recover(&log_file, &paths, base, config, clean_end).await?;
        Ok((
            Segment {
                base,
                paths,
                log_file,
                phase: Phase::Sealed,
                index: recovered.index,
                next_offset: recovered.next_offset,
                size: recovered.valid_end,
                flushed_size: recovered.valid_end,
                created_ms: now_ms,
                named_durably: true,
            },
            recovered.report,
        ))
    }

    /// Creates an empty active segment with base offset `base` in `dir`. With a `pool`,
    /// its files are recycled ones when a log fits (see [`super::segment_pool`]):
    /// appends overwrite the log's stale bytes in place, with no zero-fill below its
    /// end, and the indexes' zeros. Index files not from the pool are new: no index
    /// file outlives its log (deletions remove the indexes first), and a pooled one
    /// holds only zeros, under whichever name a crash left it.
    /// The new files' names (and a recycled file's rename) are not durable yet: the
    /// segment's first flush names it (see [`SegmentFlush::names`]), so the directory
    /// is synced in the round that makes its first appends durable, beside their
    /// fdatasync, instead of on the append path.
    pub async fn create(
        dir: &Path,
        base: Offset,
        config: &LogConfig,
        now_ms: i64,
        zero_fill: &ZeroFillSlot,
        pool: Option<&SegmentPool>,
    ) -> Result<Segment> {
        let paths = SegmentPaths::new(dir, base);
        let taken = pool.and_then(|p| p.take(dir, base, config.segment_bytes).map(|f| (p, f)));
        let prewritten = match taken {
            Some((pool, file)) => match pool.claim(&file, &paths).await {
                Ok(()) => Some(file.prewritten()),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot reuse a pooled segment file; creating a new one");
                    None
                }
            },
            None => None,
        };
        let log_file = open_dma(&paths.log).await?;
        if prewritten.is_none() {
            log_file
                .truncate(0)
                .await
                .map_err(|e| StorageError::io("truncate", &paths.log, e))?;
        }
        let log = Rc::clone(&log_file);
        let mut writer = SegmentWriter::open(&paths, log, 0, 0, 0, config, zero_fill).await?;
        if let Some(end) = prewritten {
            writer.log.assume_written(end);
        }
        Ok(Segment {
            base,
            paths,
            log_file,
            phase: Phase::Active(writer),
            index: SegmentIndex::new(base, config.index_interval_bytes),
            next_offset: base,
            size: 0,
            flushed_size: 0,
            created_ms: now_ms,
            named_durably: false,
        })
    }

    /// Reopens a sealed segment for appends (the last segment of a recovered log).
    pub async fn activate(&mut self, config: &LogConfig, zero_fill: &ZeroFillSlot) -> Result<()> {
        let index_bytes = self.index.offsets().encode().len() as u64;
        let time_bytes = self.index.times().encode().len() as u64;
        self.phase = Phase::Active(
            SegmentWriter::open(
                &self.paths,
                Rc::clone(&self.log_file),
                self.size,
                index_bytes,
                time_bytes,
                config,
                zero_fill,
            )
            .await?,
        );
        Ok(())
    }

    /// How far the active segment's log file is durably written past its data (zeros
    /// its zero-fill synced, a recycled file's stale bytes), when its growth tracks
    /// that; `None` for a sealed segment.
    pub fn written_end(&self) -> Option<u64> {
        match &self.phase {
            Phase::Active(w) => w.log.durably_written_end(),
            _ => None,
        }
    }

    /// [`SegmentAppender::settled_written_end`] of the log while the segment is written
    /// (active or sealing); `None` once sealed.
    pub fn settled_written_end(&mut self) -> impl std::future::Future<Output = Option<u64>> {
        let settle = self.phase.writer_mut().map(|w| w.log.settled_written_end());
        async move {
            match settle {
                Some(settle) => settle.await,
                None => None,
            }
        }
    }

    /// Treats the active segment's log below `end` as written (see
    /// [`SegmentAppender::assume_written`]); call right after [`Segment::activate`].
    pub fn assume_written(&mut self, end: u64) {
        if let Phase::Active(w) = &mut self.phase {
            w.log.assume_written(end);
        }
    }

    /// fdatasyncs the log, so whatever it holds is durable before it is served.
    pub async fn sync_log(&self) -> Result<()> {
        self.log_file
            .fdatasync()
            .await
            .map_err(|e| StorageError::io("fdatasync", &self.paths.log, e))
    }

    /// The segment's base offset.
    pub fn base(&self) -> Offset {
        self.base
    }

    /// Offset after the segment's last batch.
    pub fn next_offset(&self) -> Offset {
        self.next_offset
    }

    /// Bytes in the log, flushed or not.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The segment's indexes.
    pub fn index(&self) -> &SegmentIndex {
        &self.index
    }

    /// True once rolled; no more appends.
    pub fn is_sealed_or_sealing(&self) -> bool {
        !matches!(self.phase, Phase::Active(_))
    }

    /// True once sealed: read-only, its files complete.
    pub fn is_sealed(&self) -> bool {
        matches!(self.phase, Phase::Sealed)
    }

    /// Records with offsets in `[base, next)` that this segment can still take before its
    /// relative offsets would overflow the index's 32 bits.
    pub fn offsets_left(&self) -> u64 {
        (u64::from(u32::MAX)).saturating_sub(self.next_offset.0 - self.base.0)
    }

    /// Copies `batch` to the segment's tail with `base_offset` assigned, and indexes it.
    /// In memory until the next flush. Only for the active segment.
    pub fn append(&mut self, batch: &RecordBatch<'_>, base_offset: Offset, leader_epoch: i32) {
        assert_eq!(base_offset, self.next_offset, "offsets are dense");
        let Phase::Active(writer) = &mut self.phase else {
            panic!("append to the active segment only");
        };
        let last_offset = Offset(base_offset.0 + batch.offset_count() - 1);
        writer.log.append(&[
            &batch.rewritten_prefix(base_offset, leader_epoch),
            batch.unchanged_suffix(),
        ]);
        let added = self.index.track(IndexedBatch {
            position: FilePosition(self.size),
            base_offset,
            last_offset,
            max_timestamp: batch.max_timestamp(),
            bytes: batch.len() as u64,
        });
        writer.write_entries(added);
        self.size += batch.len() as u64;
        self.next_offset = Offset(last_offset.0 + 1);
    }

    /// Marks the active segment rolled: its next flush writes what is left, with its
    /// final max timestamp in the time index, and seals its files (see [`Seal`]).
    pub fn start_sealing(&mut self) {
        let index = &mut self.index;
        self.phase.advance(|phase| match phase {
            Phase::Active(mut w) => {
                w.write_entries(NewEntries {
                    offset: None,
                    time: index.seal_time_entry(),
                });
                Phase::Sealing(w)
            }
            other => other,
        });
    }

    /// True when a flush has something to do for this segment, or its final flush is
    /// still running (an empty segment's name is made durable by the flush of its
    /// first appends).
    pub fn needs_flush(&self) -> bool {
        match &self.phase {
            Phase::Active(w) => w.log.is_dirty() || index_due(&w.index) || index_due(&w.time_index),
            Phase::Sealing(_) | Phase::SealTaken(_) => true,
            Phase::Sealed => false,
        }
    }

    /// Seals what was appended since the last flush and returns the flush to run.
    /// The log chunks it returns are for the batch cache.
    pub fn begin_flush(&mut self) -> Option<(SegmentFlush, Vec<Chunk>)> {
        if !self.needs_flush() || matches!(self.phase, Phase::SealTaken(_)) {
            return None;
        }
        let sealing = matches!(self.phase, Phase::Sealing(_));
        self.phase.advance(|phase| match phase {
            Phase::Sealing(w) => Phase::SealTaken(w),
            other => other,
        });
        let w = self.phase.writer_mut()?;
        let log = w.log.begin_flush();
        let chunks = log
            .as_ref()
            .map(|f| f.chunks().to_vec())
            .unwrap_or_default();
        let (index, time_index) = if sealing {
            (w.index.begin_flush(), w.time_index.begin_flush())
        } else {
            (
                index_due(&w.index).then(|| w.index.begin_flush()).flatten(),
                index_due(&w.time_index)
                    .then(|| w.time_index.begin_flush())
                    .flatten(),
            )
        };
        let seal = sealing.then(|| Seal {
            log: Rc::clone(&self.log_file),
            index: Rc::clone(w.index.file()),
            time_index: Rc::clone(w.time_index.file()),
            paths: self.paths.clone(),
            log_bytes: self.size,
            keep_tail: false,
        });
        Some((
            SegmentFlush {
                log,
                index,
                time_index,
                seal,
                size: self.size,
                names: !self.named_durably,
            },
            chunks,
        ))
    }

    /// Records a finished flush: bytes up to its size are now readable, a sealing
    /// segment drops its writers, and a flush that [`named`](SegmentFlush::names) the
    /// segment (its round synced the directory) leaves its name durable.
    pub fn complete_flush(&mut self, flushed_size: u64, sealed: bool, named: bool) {
        debug_assert!(flushed_size >= self.flushed_size && flushed_size <= self.size);
        self.flushed_size = flushed_size;
        self.named_durably |= named;
        if sealed {
            self.phase = Phase::Sealed;
        }
    }

    /// Deletes the segment's files (segments a reopened log cannot reach; retention
    /// and DeleteRecords hand theirs to [`super::segment_pool`]). The log is first
    /// shrunk at [`DELETE_RATE`] (see there why), each step a short call on the
    /// blocking thread, so other blocking work (offset-store syncs) is not held up
    /// behind a whole deletion.
    pub async fn delete_files(paths: SegmentPaths) -> Result<()> {
        // Index files first, so none outlives its log (see [`Segment::create`]).
        let indexes = paths.clone();
        glommio::executor()
            .spawn_blocking(move || {
                remove_if_present(&indexes.index)?;
                remove_if_present(&indexes.time_index)
            })
            .await?;
        delete_paced(&paths.log, DELETE_RATE, || false).await
    }
}

impl SegmentWriter {
    fn write_entries(&mut self, added: NewEntries) {
        if let Some(e) = added.offset {
            self.index.append(&[&OffsetIndex::encode_entry(e)]);
        }
        if let Some(e) = added.time {
            self.time_index.append(&[&TimeIndex::encode_entry(e)]);
        }
    }

    pub(crate) async fn open(
        paths: &SegmentPaths,
        log_file: Rc<DmaFile>,
        log_bytes: u64,
        index_bytes: u64,
        time_index_bytes: u64,
        config: &LogConfig,
        zero_fill: &ZeroFillSlot,
    ) -> Result<SegmentWriter> {
        let index_file = open_dma(&paths.index).await?;
        let time_file = open_dma(&paths.time_index).await?;
        let small = 64 << 10;
        Ok(SegmentWriter {
            log: SegmentAppender::open(
                log_file,
                paths.log.clone(),
                log_bytes,
                config.growth,
                config.write_chunk_bytes_max,
                zero_fill.clone(),
            )
            .await?,
            index: SegmentAppender::open(
                index_file,
                paths.index.clone(),
                index_bytes,
                FileGrowth::Append,
                small,
                zero_fill.clone(),
            )
            .await?,
            time_index: SegmentAppender::open(
                time_file,
                paths.time_index.clone(),
                time_index_bytes,
                FileGrowth::Append,
                small,
                zero_fill.clone(),
            )
            .await?,
        })
    }
}

impl SegmentFlush {
    /// Size of the log once this flush completes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes its writes hand the device: (log, both indexes).
    pub fn written_bytes(&self) -> (u64, u64) {
        let bytes = |w: &Option<FlushWrite>| w.as_ref().map_or(0, FlushWrite::written_bytes);
        (
            bytes(&self.log),
            bytes(&self.index) + bytes(&self.time_index),
        )
    }

    /// True when the segment's name is not durable yet: the round that runs this flush
    /// must fdatasync the segment's directory too before its data counts as durable.
    pub fn names(&self) -> bool {
        self.names
    }

    /// True when this flush seals the segment.
    pub fn seals(&self) -> bool {
        self.seal.is_some()
    }

    /// Makes the seal leave the log's file whole, whatever lies past its data (a clean
    /// close: see `partition_log::clean_close`).
    pub fn keep_log_tail(&mut self) {
        if let Some(seal) = &mut self.seal {
            seal.keep_tail = true;
        }
    }

    /// Takes out the sealing work, for the caller to run once the round that makes this
    /// flush's data durable is over (a group commit then waits for no truncation).
    /// Without it, [`run`](Self::run) seals inline.
    pub fn take_seal(&mut self) -> Option<Seal> {
        self.seal.take()
    }

    /// The files that need their own fdatasync after [`run`](Self::run)`(false)`: the
    /// log when its write changes metadata. Indexes are derived data, rebuilt by
    /// recovery; a seal left in syncs its own files.
    pub fn sync_files(&self) -> Vec<SyncFile> {
        match &self.log {
            Some(log) if log.changes_metadata() => vec![log.sync_file()],
            _ => Vec::new(),
        }
    }

    /// The log file this flush writes, if it writes it.
    pub fn written_file(&self) -> Option<SyncFile> {
        self.log.as_ref().map(FlushWrite::sync_file)
    }

    /// Writes the log and its indexes; fdatasyncs the log when `sync`. A sealing flush
    /// whose seal was not taken out also runs it (see [`Seal`]): fdatasyncs each file
    /// (index files are otherwise derived data, rebuilt by recovery, and not synced).
    pub async fn run(self, sync: bool) -> Result<()> {
        let sealing = self.seal.is_some();
        let log = async {
            match self.log {
                Some(w) => w.run(sync && !sealing).await.map(|_| ()),
                None => Ok(()),
            }
        };
        let index = async {
            match self.index {
                Some(w) => w.run(false).await.map(|_| ()),
                None => Ok(()),
            }
        };
        let time_index = async {
            match self.time_index {
                Some(w) => w.run(false).await.map(|_| ()),
                None => Ok(()),
            }
        };
        let ((a, b), c) =
            futures_lite::future::zip(futures_lite::future::zip(log, index), time_index).await;
        a?;
        b?;
        c?;
        if let Some(seal) = self.seal {
            seal.finish().await?;
        }
        Ok(())
    }
}

impl Segment {
    /// Readable end of the log: its flushed size.
    pub fn flushed_size(&self) -> FilePosition {
        FilePosition(self.flushed_size)
    }
}
