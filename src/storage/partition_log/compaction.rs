//! Log compaction (`cleanup.policy=compact`): keeping only the newest record of each key
//! in the log's sealed segments, as Kafka's log cleaner does.
//!
//! A pass takes the *cleanable* segments — sealed, from the start of the log, each
//! older than `min.compaction.lag.ms`, none reaching the last stable offset — and
//! drops the records of aborted transactions besides:
//! 1. reads their records and notes the last offset of every key (a record in the
//!    active segment is not considered, so an older version in a sealed segment stays
//!    until the active segment rolls, as in Kafka);
//! 2. rewrites each of them into `<base>.log.cleaned` keeping a record when it is the
//!    newest of its key, and a tombstone (null value) only until it is older than
//!    `delete.retention.ms`; records without a key are dropped; a transaction's COMMIT
//!    or ABORT marker goes once none of the transaction's batches is left and the marker
//!    is older than `delete.retention.ms` (as Kafka's cleaner removes it, so the markers
//!    of an exactly-once changelog do not pile up). Offsets never change:
//!    a batch keeps its offset range with fewer records, a batch an idempotent producer's
//!    state still points at stays as an empty batch, and a run of batches left with no
//!    record becomes one empty filler batch (see `batch_compaction`), so batches still
//!    follow each other densely;
//! 3. swaps the new file in, crash-safely: the old indexes are removed (and the removal
//!    made durable) before the fsynced `.cleaned` log is renamed over the old one in one
//!    atomic rename, then the new indexes are renamed in. A crash at any point leaves the
//!    old log or the new one, whole, with indexes that recovery rebuilds when missing;
//!    leftover `.cleaned` files are deleted when the log is opened.
//!
//! Reads in flight keep the file they opened, so a consumer reading from the beginning
//! during a pass sees each segment either before or after its rewrite. Work is paced
//! ([`Pace`]) so a pass does not take the device from produce.

use std::{collections::HashMap, path::Path, rc::Rc};

use glommio::io::DmaFile;
use weir_client::record_batch::ATTRIBUTE_CONTROL;

pub use super::compaction_pace::Pace;
use super::{
    compaction_output::{Output, Run, Written},
    compaction_pace::READ_WINDOW_BYTES,
    PartitionLog,
};
use crate::storage::{
    batch_cache::SegmentKey,
    batch_compaction::with_records,
    batch_records::{records, RecordSpan},
    config::LogConfig,
    failpoint,
    record_batch::{BatchHeader, RecordBatch},
    recovery,
    segment::{open_dma, SegmentPaths},
    segment_files::{remove_if_present, rename},
    Offset, Result, StorageError,
};

/// Suffix of the files a pass writes before swapping them in.
pub const CLEANED_SUFFIX: &str = ".cleaned";

/// The most memory the key map of one pass may take (keys and their offsets); segments
/// past the point where it fills wait for the next pass, as with Kafka's
/// `log.cleaner.dedupe.buffer.size`.
const KEY_MAP_BYTES_MAX: usize = 128 << 20;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Sealed segments the pass read.
    pub segments_read: usize,
    /// Segments rewritten (those with something to remove).
    pub segments_rewritten: usize,
    /// Bytes of log the pass read (both passes count once).
    pub bytes_read: u64,
    /// Bytes the rewritten segments held before.
    pub bytes_before: u64,
    /// Bytes they hold now.
    pub bytes_after: u64,
    /// Records removed.
    pub records_removed: u64,
}

/// One cleanable segment as the pass saw it.
struct Cleanable {
    base: Offset,
    file: Rc<DmaFile>,
    paths: SegmentPaths,
    size: u64,
    next_offset: Offset,
}

/// What one segment's rewrite reads and updates of its pass.
struct SegmentPass<'a> {
    /// The newest offset of every key.
    keys: &'a KeyMap,
    /// Tombstones and markers older than this (ms) go.
    horizon: i64,
    /// The transactions seen so far in the pass.
    txns: &'a mut TxnsInView,
    /// The oldest tombstone or marker kept only for its age.
    removals_due: &'a mut Option<i64>,
}

/// Per producer, whether a batch of its current transaction stays after the pass: a
/// transaction's marker may go only when none does (a batch left without its marker
/// would read as a transaction still open). The pass reads from the start of the log,
/// so every batch of a transaction that is still stored comes before its marker here.
#[derive(Default)]
struct TxnsInView {
    data_left: HashMap<i64, bool>,
}

impl TxnsInView {
    /// A transactional batch of `producer_id`, which stays or goes.
    fn saw(&mut self, producer_id: i64, stays: bool) {
        *self.data_left.entry(producer_id).or_default() |= stays;
    }

    /// `producer_id`'s marker: whether a batch of the transaction it ends stays.
    fn end(&mut self, producer_id: i64) -> bool {
        self.data_left.remove(&producer_id).unwrap_or(false)
    }
}

/// Notes that something kept only for its age (`at`, ms) is due to go later.
fn note_due(due: &mut Option<i64>, at: i64) {
    *due = Some(due.map_or(at, |t| t.min(at)));
}

/// The newest offset of every key in the cleanable segments.
#[derive(Default)]
struct KeyMap {
    latest: HashMap<Box<[u8]>, u64>,
    bytes: usize,
}

impl KeyMap {
    fn note(&mut self, key: &[u8], offset: u64) {
        match self.latest.get_mut(key) {
            Some(at) => *at = offset,
            None => {
                self.bytes += key.len() + 48;
                self.latest.insert(key.into(), offset);
            }
        }
    }
}

impl PartitionLog {
    /// True when the log is compacted and a pass has something new to do: a sealed
    /// segment it has not compacted, or a tombstone or marker whose time is up.
    pub fn compaction_due(&self) -> bool {
        let config = self.shared.config.borrow();
        if !config.cleanup.compacts() {
            return false;
        }
        let now = self.shared.env.clock.now_ms();
        let st = self.shared.state.borrow();
        let sealed_past = st
            .segments
            .iter()
            .take(st.segments.len().saturating_sub(1))
            .filter(|s| s.is_sealed())
            .any(|s| s.next_offset() > st.cleaned_to);
        sealed_past || st.removals_due.is_some_and(|at| at <= now)
    }

    /// Runs one compaction pass over the cleanable segments (see the module docs).
    pub async fn compact(&self, pace: &mut Pace) -> Result<CompactionReport> {
        let config = self.config();
        let mut report = CompactionReport::default();
        if !config.cleanup.compacts() {
            return Ok(report);
        }
        let now = self.shared.env.clock.now_ms();
        let cleanable = self.cleanable(&config, now);
        let mut keys = KeyMap::default();
        let mut mapped = 0;
        for segment in &cleanable {
            let mut scanner = Scanner::new(segment);
            while let Some(window) = scanner.next(pace).await? {
                for batch in scanner.batches(&window)? {
                    if batch.attributes() & ATTRIBUTE_CONTROL != 0
                        || batch.record_count() == 0
                        || self.in_aborted_transaction(&batch)
                    {
                        continue;
                    }
                    let recs = records(&batch).map_err(|e| corrupt(segment, &batch, e))?;
                    let base = batch.base_offset() as u64;
                    for span in &recs.spans {
                        if let Some(key) = recs.key(span) {
                            keys.note(key, base + u64::from(span.offset_delta));
                        }
                    }
                }
            }
            report.bytes_read += segment.size;
            mapped += 1;
            if keys.bytes > KEY_MAP_BYTES_MAX {
                break;
            }
        }
        let horizon = now.saturating_sub(config.delete_retention.as_millis() as i64);
        let mut removals_due: Option<i64> = None;
        // Read from the start of the log, so a marker's transaction is wholly in view.
        let mut txns = TxnsInView::default();
        for segment in &cleanable[..mapped] {
            report.segments_read += 1;
            let mut pass = SegmentPass {
                keys: &keys,
                horizon,
                txns: &mut txns,
                removals_due: &mut removals_due,
            };
            let rewritten = self.rewrite(segment, &config, &mut pass, pace).await?;
            if let Some((after, removed)) = rewritten {
                report.segments_rewritten += 1;
                report.bytes_before += segment.size;
                report.bytes_after += after;
                report.records_removed += removed;
            }
        }
        let mut st = self.shared.state.borrow_mut();
        if let Some(last) = cleanable[..mapped].last() {
            st.cleaned_to = st.cleaned_to.max(last.next_offset);
        }
        st.removals_due =
            removals_due.map(|t| t.saturating_add(config.delete_retention.as_millis() as i64));
        Ok(report)
    }

    /// The sealed segments from the start of the log that are past the compaction lag.
    fn cleanable(&self, config: &LogConfig, now: i64) -> Vec<Cleanable> {
        let lag = config.min_compaction_lag.as_millis() as i64;
        let st = self.shared.state.borrow();
        // Never past the last stable offset: an open transaction's records may yet
        // be aborted, so they can neither shadow older values nor be cleaned.
        let stable = st.txns.last_stable(st.high_watermark);
        st.segments
            .iter()
            .take(st.segments.len().saturating_sub(1))
            .take_while(|s| s.is_sealed() && s.index().max_timestamp() <= now - lag)
            .take_while(|s| s.next_offset() <= stable)
            .map(|s| Cleanable {
                base: s.base(),
                file: Rc::clone(&s.log_file),
                paths: s.paths.clone(),
                size: s.flushed_size().0,
                next_offset: s.next_offset(),
            })
            .collect()
    }

    /// Writes `segment` with what `pass` says to keep into `.cleaned` files and swaps
    /// them in; `None` when nothing was removed (the segment is left alone).
    async fn rewrite(
        &self,
        segment: &Cleanable,
        config: &LogConfig,
        pass: &mut SegmentPass<'_>,
        pace: &mut Pace,
    ) -> Result<Option<(u64, u64)>> {
        let SegmentPass {
            keys,
            horizon,
            txns,
            removals_due,
        } = pass;
        let horizon = *horizon;
        let cleaned = cleaned_paths(&segment.paths);
        let mut out = Output::create(&cleaned.log, segment.base, config).await?;
        let mut removed = 0u64;
        // Whether a batch went (an emptied one whose producer is forgotten goes with no
        // record removed).
        let mut dropped = false;
        let mut run: Option<Run> = None;
        let mut scanner = Scanner::new(segment);
        while let Some(window) = scanner.next(pace).await? {
            for batch in scanner.batches(&window)? {
                let batch = &batch;
                let base = batch.base_offset() as u64;
                let last = base + batch.offset_count() - 1;
                let epoch = batch.partition_leader_epoch();
                if batch.attributes() & ATTRIBUTE_CONTROL != 0 {
                    let data_left = txns.end(batch.producer_id());
                    if data_left || batch.max_timestamp() >= horizon {
                        if !data_left {
                            note_due(removals_due, batch.max_timestamp());
                        }
                        out.flush_run(&mut run);
                        out.push(batch.as_bytes().to_vec(), base, last, batch.max_timestamp());
                    } else {
                        removed += batch.record_count() as u64;
                        dropped = true;
                        out.extend_run(&mut run, base, last, batch.max_timestamp(), epoch);
                    }
                    continue;
                }
                let recs = records(batch).map_err(|e| corrupt(segment, batch, e))?;
                let aborted = self.in_aborted_transaction(batch);
                let kept: Vec<&RecordSpan> = recs
                    .spans
                    .iter()
                    .filter(|span| {
                        let offset = base + u64::from(span.offset_delta);
                        let newest = recs
                            .key(span)
                            .and_then(|k| keys.latest.get(k))
                            .is_some_and(|at| *at == offset);
                        let expired = span.tombstone && span.timestamp < horizon;
                        if newest && span.tombstone && !expired {
                            note_due(removals_due, span.timestamp);
                        }
                        newest && !expired && !aborted
                    })
                    .collect();
                removed += (recs.spans.len() - kept.len()) as u64;
                let remembered = || {
                    batch.producer_id() >= 0
                        && self
                            .shared
                            .state
                            .borrow()
                            .producers
                            .remembers(batch.producer_id(), Offset(last))
                };
                // A batch a pass emptied stays only while its producer's state points at
                // it; a filler (no producer) stays as it is.
                let unchanged = if recs.spans.is_empty() {
                    batch.producer_id() < 0 || remembered()
                } else {
                    kept.len() == recs.spans.len()
                };
                let stays = if unchanged {
                    out.flush_run(&mut run);
                    out.push(batch.as_bytes().to_vec(), base, last, batch.max_timestamp());
                    true
                } else if !kept.is_empty() || remembered() {
                    let bytes = with_records(batch, &recs, &kept)
                        .map_err(|e| corrupt(segment, batch, e))?;
                    out.flush_run(&mut run);
                    out.push(bytes, base, last, batch.max_timestamp());
                    true
                } else {
                    out.extend_run(&mut run, base, last, batch.max_timestamp(), epoch);
                    dropped = true;
                    false
                };
                if batch.is_transactional() {
                    txns.saw(batch.producer_id(), stays);
                }
            }
            out.drain(pace, false).await?;
        }
        out.flush_run(&mut run);
        if removed == 0 && !dropped {
            out.abandon().await;
            return Ok(None);
        }
        let written = out.finish(pace).await?;
        if written.next_offset != segment.next_offset {
            return Err(StorageError::Corrupt {
                path: segment.paths.log.clone(),
                position: 0,
                detail: format!(
                    "compacted segment ends at {} instead of {}",
                    written.next_offset, segment.next_offset
                ),
            });
        }
        recovery::rewrite(&cleaned.index, &written.index.offsets().encode()).await?;
        recovery::rewrite(&cleaned.time_index, &written.index.times().encode()).await?;
        let size = written.size;
        if !self.swap(segment, &cleaned, written).await? {
            remove_cleaned(&cleaned).await;
            return Ok(None);
        }
        Ok(Some((size, removed)))
    }

    /// Renames the cleaned files over `segment`'s and makes the log use them. `false`
    /// when the segment changed meanwhile (deleted, or the log closed): nothing is done.
    async fn swap(
        &self,
        segment: &Cleanable,
        cleaned: &SegmentPaths,
        written: Written,
    ) -> Result<bool> {
        let shared = &self.shared;
        let Ok(_permit) = self.lock_maintenance().await else {
            return Ok(false);
        };
        let current = |st: &super::LogState| {
            !st.closed
                && st.segments.iter().any(|s| {
                    s.base() == segment.base
                        && Rc::ptr_eq(&s.log_file, &segment.file)
                        && s.is_sealed()
                })
        };
        if !current(&shared.state.borrow()) {
            return Ok(false);
        }
        let old = segment.paths.clone();
        // Old indexes go first: from here a crash leaves a log whose indexes recovery
        // rebuilds, whichever log it is.
        step("compaction remove indexes", {
            let old = old.clone();
            move || {
                remove_if_present(&old.index)?;
                remove_if_present(&old.time_index)
            }
        })
        .await?;
        self.sync_dir().await?;
        step("compaction rename log", {
            let (from, to) = (cleaned.log.clone(), old.log.clone());
            move || rename(&from, &to)
        })
        .await?;
        step("compaction rename indexes", {
            let cleaned = cleaned.clone();
            let old = old.clone();
            move || {
                rename(&cleaned.index, &old.index)?;
                rename(&cleaned.time_index, &old.time_index)
            }
        })
        .await?;
        self.sync_dir().await?;
        let file = open_dma(&old.log).await?;
        let mut st = shared.state.borrow_mut();
        if let Some(s) = st.segments.iter_mut().find(|s| s.base() == segment.base) {
            s.log_file = file;
            s.index = written.index;
            s.size = written.size;
            s.flushed_size = written.size;
        }
        drop(st);
        shared.env.cache.remove_segment(SegmentKey {
            log_id: shared.env.id,
            base_offset: segment.base.0,
        });
        Ok(true)
    }
}

/// Reads a segment front to back, a window of whole batches at a time.
struct Scanner<'a> {
    segment: &'a Cleanable,
    position: u64,
}

impl<'a> Scanner<'a> {
    fn new(segment: &'a Cleanable) -> Scanner<'a> {
        Scanner {
            segment,
            position: 0,
        }
    }

    /// The next window of whole batches, `None` at the end of the segment.
    async fn next(&mut self, pace: &mut Pace) -> Result<Option<Vec<u8>>> {
        let segment = self.segment;
        let position = self.position;
        if position >= segment.size {
            return Ok(None);
        }
        let left = segment.size - position;
        let want = (READ_WINDOW_BYTES as u64).min(left) as usize;
        let mut window = read(segment, position, want).await?;
        let head = BatchHeader::parse(&window)
            .ok_or_else(|| corrupt_at(segment, position, "unreadable batch header"))?;
        if head.total_bytes > window.len() {
            if head.total_bytes as u64 > left {
                return Err(corrupt_at(segment, position, "batch runs past the segment"));
            }
            window = read(segment, position, head.total_bytes).await?;
        }
        let mut whole = 0usize;
        while let Some(h) = BatchHeader::parse(&window[whole..]) {
            if whole + h.total_bytes > window.len() {
                break;
            }
            whole += h.total_bytes;
        }
        window.truncate(whole);
        self.position += whole as u64;
        pace.spend(whole as u64).await;
        Ok(Some(window))
    }

    /// Every batch of a window from [`next`](Self::next), validated.
    fn batches<'w>(&self, window: &'w [u8]) -> Result<Vec<RecordBatch<'w>>> {
        let start = self.position - window.len() as u64;
        let mut out = Vec::new();
        let mut rest = window;
        while !rest.is_empty() {
            let at = start + (window.len() - rest.len()) as u64;
            let (batch, tail) = RecordBatch::validate_stored(rest, rest.len())
                .map_err(|e| corrupt_at(self.segment, at, &e.to_string()))?;
            out.push(batch);
            rest = tail;
        }
        Ok(out)
    }
}

async fn read(segment: &Cleanable, position: u64, len: usize) -> Result<Vec<u8>> {
    let read = segment
        .file
        .read_at(position, len)
        .await
        .map_err(|e| StorageError::io("read", &segment.paths.log, e))?;
    Ok(read[..read.len().min(len)].to_vec())
}

fn corrupt_at(segment: &Cleanable, position: u64, detail: &str) -> StorageError {
    StorageError::Corrupt {
        path: segment.paths.log.clone(),
        position,
        detail: detail.to_string(),
    }
}

fn corrupt(
    segment: &Cleanable,
    batch: &RecordBatch<'_>,
    e: impl std::fmt::Display,
) -> StorageError {
    StorageError::Corrupt {
        path: segment.paths.log.clone(),
        position: 0,
        detail: format!("batch at offset {}: {e}", batch.base_offset()),
    }
}

fn cleaned_paths(paths: &SegmentPaths) -> SegmentPaths {
    let with = |p: &Path| {
        let mut name = p.as_os_str().to_owned();
        name.push(CLEANED_SUFFIX);
        std::path::PathBuf::from(name)
    };
    SegmentPaths {
        log: with(&paths.log),
        index: with(&paths.index),
        time_index: with(&paths.time_index),
    }
}

async fn remove_cleaned(cleaned: &SegmentPaths) {
    let cleaned = cleaned.clone();
    let _ = glommio::executor()
        .spawn_blocking(move || {
            remove_if_present(&cleaned.log)?;
            remove_if_present(&cleaned.index)?;
            remove_if_present(&cleaned.time_index)
        })
        .await;
}

/// Deletes every `.cleaned` file in `dir`: what a pass that did not finish left.
pub(super) async fn remove_leftovers(dir: &Path) -> Result<()> {
    let dir = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            let entries = std::fs::read_dir(&dir).map_err(|e| StorageError::io("list", &dir, e))?;
            for entry in entries {
                let path = entry.map_err(|e| StorageError::io("list", &dir, e))?.path();
                if path.to_string_lossy().ends_with(CLEANED_SUFFIX) {
                    tracing::info!(path = %path.display(), "removing what an unfinished compaction left");
                    remove_if_present(&path)?;
                }
            }
            Ok(())
        })
        .await
}

/// Runs one file-system step on the blocking pool; under test a failpoint named `name`
/// stops there, as a crash would.
async fn step(name: &'static str, f: impl FnOnce() -> Result<()> + Send + 'static) -> Result<()> {
    if let Some(e) = failpoint::check(name) {
        return Err(StorageError::io(name, Path::new(name), e));
    }
    glommio::executor().spawn_blocking(f).await
}
