//! Opening a segment that is already on disk, repairing what a crash left behind.
//!
//! The log is the truth; the indexes are derived from it. Opening a segment:
//! 1. decodes `.index` and `.timeindex`, keeping their valid prefixes; a missing file or
//!    one with garbage after its valid prefix (not just zero padding) discards both;
//! 2. replays the log from the last offset index entry (or from the start), checking
//!    every batch's header, length, CRC-32C and that its base offset continues the
//!    previous batch's offsets densely;
//! 3. truncates the log at the first batch that fails (torn, zeroed, corrupt), so what
//!    remains is a prefix of what was written, never a half-kept batch — except where a
//!    clean close recorded that the data ends there (`partition_log::clean_close`): the
//!    bytes past it then stay, for appends to overwrite;
//! 4. rewrites the index files when they differ from the replayed indexes.
//!
//! A batch that was acknowledged as durable was fsynced whole, so it passes every check
//! and is kept; only bytes past the last fsync can fail them.

use std::{path::Path, rc::Rc};

use bytes::Bytes;
use glommio::io::DmaFile;

use super::{
    config::{LogConfig, STORED_BATCH_BYTES_MAX},
    record_batch::{self, BatchHeader, HEADER_BYTES},
    segment_appender::{SegmentAppender, ZeroFillSlot},
    segment_files::{open_dma, open_dma_if_present, SegmentPaths},
    segment_index::{is_zero_padding, IndexedBatch, OffsetIndex, SegmentIndex, TimeIndex},
    FilePosition, Offset, Result, StorageError,
};

/// Bytes read per step while replaying a log.
const SCAN_WINDOW_BYTES: usize = 1 << 20;

/// The most trailing zeros recovery reads to tell padding from damage. Larger than any
/// zero-fill step in use; a longer zero tail is reported as truncated.
const PADDING_BYTES_MAX: u64 = 64 << 20;

/// What opening a segment found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Bytes cut from the end of the log (torn, zeroed or corrupt), not counting the
    /// zeros that every O_DIRECT flush and zero-fill ahead leave past the last batch.
    pub truncated_bytes: u64,
    /// Zeros trimmed from the end of the log: page padding and zero-fill ahead of the
    /// tail, or a recycled file's earlier batches (normal after a crash).
    pub padding_bytes: u64,
    /// Bytes past the data left in place because a clean close said where the data
    /// ends (see `partition_log::clean_close`): zeros or a recycled file's stale bytes,
    /// which appends overwrite.
    pub kept_tail_bytes: u64,
    /// Why the log was cut, when it was.
    pub truncation_reason: Option<String>,
    /// True when the index files were missing or damaged and rebuilt from the log.
    pub index_rebuilt: bool,
    /// True when an index file on disk differed from the replayed index and was
    /// rewritten (after a crash, the active segment's indexes usually are).
    pub indexes_rewritten: bool,
    /// Batches checked during replay.
    pub batches_replayed: u64,
}

async fn read_optional(path: &Path) -> Result<Option<Bytes>> {
    let Some(file) = open_dma_if_present(path, false).await? else {
        return Ok(None);
    };
    let len = file
        .file_size()
        .await
        .map_err(|e| StorageError::io("stat", path, e))?;
    let bytes = if len == 0 {
        Bytes::new()
    } else {
        let read = file
            .read_at(0, len as usize)
            .await
            .map_err(|e| StorageError::io("read", path, e))?;
        Bytes::copy_from_slice(&read[..])
    };
    file.close()
        .await
        .map_err(|e| StorageError::io("close", path, e))?;
    Ok(Some(bytes))
}

/// True when an index file's content is `entries` followed by nothing or by zeros (a
/// page's padding; a recycled file's zeroed rest).
fn holds(file: Option<&[u8]>, entries: &[u8]) -> bool {
    file.is_some_and(|f| f.starts_with(entries) && is_zero_padding(&f[entries.len()..]))
}

/// Replaces a file's content with `bytes`, exactly, durably.
pub(crate) async fn rewrite(path: &Path, bytes: &[u8]) -> Result<()> {
    let file = open_dma(path).await?;
    file.truncate(0)
        .await
        .map_err(|e| StorageError::io("truncate", path, e))?;
    let mut appender = SegmentAppender::open(
        Rc::clone(&file),
        path.to_path_buf(),
        0,
        super::config::FileGrowth::Append,
        1 << 20,
        ZeroFillSlot::new(),
    )
    .await?;
    appender.append(&[bytes]);
    if let Some(write) = appender.begin_flush() {
        write.run(false).await?;
    }
    file.truncate(bytes.len() as u64)
        .await
        .map_err(|e| StorageError::io("truncate", path, e))?;
    file.fdatasync()
        .await
        .map_err(|e| StorageError::io("fdatasync", path, e))
}

struct Replay {
    valid_end: u64,
    next_offset: Offset,
    batches: u64,
    stop: Option<String>,
    padding: bool,
}

/// A read-ahead window over the log being replayed.
struct Window {
    bytes: Bytes,
    at: u64,
}

impl Window {
    /// The `need` bytes at `position`, reading ahead when they are not in the window;
    /// `None` when the file holds fewer.
    async fn cover(
        &mut self,
        file: &DmaFile,
        path: &Path,
        position: u64,
        need: usize,
        left: u64,
    ) -> Result<Option<&[u8]>> {
        let end = position + need as u64;
        if position < self.at || end > self.at + self.bytes.len() as u64 {
            let len = need.max(SCAN_WINDOW_BYTES).min(left as usize);
            let read = file
                .read_at(position, len)
                .await
                .map_err(|e| StorageError::io("read", path, e))?;
            self.bytes = Bytes::copy_from_slice(&read[..read.len().min(len)]);
            self.at = position;
        }
        let from = (position - self.at) as usize;
        Ok(self.bytes.get(from..from + need))
    }
}

/// Replays the log from `start`, whose batch must have base offset `expected`, adding
/// index entries as appends would. Stops at the first batch that fails a check.
async fn replay(
    file: &DmaFile,
    path: &Path,
    file_len: u64,
    start: FilePosition,
    expected: Offset,
    index: &mut SegmentIndex,
) -> Result<Replay> {
    let mut r = Replay {
        valid_end: start.0,
        next_offset: expected,
        batches: 0,
        stop: None,
        padding: false,
    };
    let mut window = Window {
        bytes: Bytes::new(),
        at: start.0,
    };
    let mut position = start.0;
    while position < file_len {
        let left = file_len - position;
        let Some(head) = window
            .cover(file, path, position, HEADER_BYTES, left)
            .await?
        else {
            r.stop = Some(format!("{left} trailing bytes cannot hold a batch header"));
            break;
        };
        let Some(h) = BatchHeader::parse(head) else {
            r.stop = Some("zeroed or unreadable batch header".into());
            break;
        };
        if h.total_bytes > STORED_BATCH_BYTES_MAX || h.total_bytes as u64 > left {
            r.stop = Some(format!(
                "batch of {} bytes runs past the file",
                h.total_bytes
            ));
            break;
        }
        let Some(bytes) = window
            .cover(file, path, position, h.total_bytes, left)
            .await?
        else {
            r.stop = Some("short read".into());
            break;
        };
        if let Err(e) = record_batch::check_stored(bytes, STORED_BATCH_BYTES_MAX) {
            r.stop = Some(e.to_string());
            break;
        }
        if h.base_offset < 0 || h.base_offset as u64 != r.next_offset.0 {
            // An intact batch from before this segment's base: a recycled file's
            // earlier contents (see `segment_pool`), where the data ends.
            r.padding = (h.base_offset as u64) < index.base().0;
            r.stop = Some(format!(
                "batch base offset {} does not follow {}",
                h.base_offset, r.next_offset.0
            ));
            break;
        }
        let last = Offset(h.last_offset() as u64);
        if last.0 - index.base().0 >= u64::from(u32::MAX) {
            r.stop = Some("batch offsets overflow the segment's 32-bit index".into());
            break;
        }
        index.track(IndexedBatch {
            position: FilePosition(position),
            base_offset: r.next_offset,
            last_offset: last,
            max_timestamp: h.max_timestamp,
            bytes: h.total_bytes as u64,
        });
        r.batches += 1;
        position += h.total_bytes as u64;
        r.valid_end = position;
        r.next_offset = Offset(last.0 + 1);
    }
    Ok(r)
}

/// True when the log holds only zeros from `from` to its end (`file_len`): what O_DIRECT
/// page padding and zero-fill ahead leave behind. Anything else is damage, as is a
/// zero tail too long to read ([`PADDING_BYTES_MAX`]).
async fn zero_tail(file: &DmaFile, path: &Path, from: u64, file_len: u64) -> Result<bool> {
    let left = file_len - from;
    if left == 0 || left > PADDING_BYTES_MAX {
        return Ok(false);
    }
    let mut window = Window {
        bytes: Bytes::new(),
        at: from,
    };
    let rest = window.cover(file, path, from, left as usize, left).await?;
    Ok(rest.is_some_and(|b| b.iter().all(|&x| x == 0)))
}

/// Where a clean close left a segment (see `partition_log::clean_close`): the length of
/// its data and of its log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanEnd {
    /// Where its last batch ends.
    pub data: u64,
    /// The log file's length, data and the tail past it.
    pub file: u64,
}

/// A segment as recovery left it.
pub struct Recovered {
    /// Its indexes, replayed from the log.
    pub index: SegmentIndex,
    /// The offset after its last intact batch.
    pub next_offset: Offset,
    /// Where its last intact batch ends: the log's length after the repair.
    pub valid_end: u64,
    /// What was found and repaired.
    pub report: RecoveryReport,
}

/// Recovers the segment with base offset `base` whose log is open as `log_file`, as the
/// module docs describe: the log is truncated (and fdatasynced) after its last intact
/// batch and the index files rewritten when they differ from the replayed indexes.
/// `clean_end` is where a clean close left the segment: when the file still has the
/// length it had then and the replay ends exactly where the data did, the bytes past it
/// are not the log's (see `partition_log::clean_close`) and stay, for appends to
/// overwrite.
pub async fn recover(
    log_file: &Rc<DmaFile>,
    paths: &SegmentPaths,
    base: Offset,
    config: &LogConfig,
    clean_end: Option<CleanEnd>,
) -> Result<Recovered> {
    let file_len = log_file
        .file_size()
        .await
        .map_err(|e| StorageError::io("stat", &paths.log, e))?;
    let index_file = read_optional(&paths.index).await?;
    let time_file = read_optional(&paths.time_index).await?;
    let mut report = RecoveryReport::default();
    let (offsets, times) = match (&index_file, &time_file) {
        (Some(i), Some(t)) => {
            let (offsets, offsets_clean) = OffsetIndex::decode(i, file_len);
            let (times, times_clean) = TimeIndex::decode(t, u64::from(u32::MAX) + 1);
            if offsets_clean && times_clean {
                (offsets, times)
            } else {
                report.index_rebuilt = true;
                (OffsetIndex::default(), TimeIndex::default())
            }
        }
        _ => {
            report.index_rebuilt = file_len > 0;
            (OffsetIndex::default(), TimeIndex::default())
        }
    };
    let interval = config.index_interval_bytes;
    let (mut index, start, expected) = SegmentIndex::resume(base, interval, offsets, times);
    let mut r = replay(log_file, &paths.log, file_len, start, expected, &mut index).await?;
    if start.0 > 0 && r.batches == 0 && r.valid_end < file_len {
        // The last index entry does not point at a good batch: distrust the index.
        report.index_rebuilt = true;
        let (fresh, _, _) =
            SegmentIndex::resume(base, interval, OffsetIndex::default(), TimeIndex::default());
        index = fresh;
        r = replay(
            log_file,
            &paths.log,
            file_len,
            FilePosition(0),
            base,
            &mut index,
        )
        .await?;
    }
    report.batches_replayed = r.batches;
    let kept = clean_end
        == Some(CleanEnd {
            data: r.valid_end,
            file: file_len,
        });
    if !kept && !r.padding {
        r.padding = zero_tail(log_file, &paths.log, r.valid_end, file_len).await?;
    }
    if kept {
        report.kept_tail_bytes = file_len - r.valid_end;
    } else if r.valid_end < file_len && r.padding {
        report.padding_bytes = file_len - r.valid_end;
    } else if r.valid_end < file_len {
        report.truncated_bytes = file_len - r.valid_end;
        report.truncation_reason = r.stop.clone();
        tracing::warn!(
            path = %paths.log.display(),
            valid_bytes = r.valid_end,
            truncated_bytes = report.truncated_bytes,
            reason = r.stop.as_deref().unwrap_or(""),
            "truncating log after the last intact batch"
        );
    }
    if r.valid_end < file_len && !kept {
        log_file
            .truncate(r.valid_end)
            .await
            .map_err(|e| StorageError::io("truncate", &paths.log, e))?;
        log_file
            .fdatasync()
            .await
            .map_err(|e| StorageError::io("fdatasync", &paths.log, e))?;
    }
    // A sealed segment's time index ends with its largest timestamp; restoring that
    // entry makes a cleanly sealed segment's replayed index equal its files.
    index.seal_time_entry();
    let index_bytes = index.offsets().encode();
    let time_bytes = index.times().encode();
    if !holds(index_file.as_deref(), &index_bytes) {
        rewrite(&paths.index, &index_bytes).await?;
        report.indexes_rewritten = true;
    }
    if !holds(time_file.as_deref(), &time_bytes) {
        rewrite(&paths.time_index, &time_bytes).await?;
        report.indexes_rewritten = true;
    }
    if report.index_rebuilt {
        tracing::warn!(path = %paths.index.display(), "rebuilt segment indexes from the log");
    }
    Ok(Recovered {
        index,
        next_offset: r.next_offset,
        valid_end: r.valid_end,
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::segment::Segment;
    use crate::storage::{
        record_batch::ProducePayload,
        segment_index::OffsetEntry,
        test_support::{run, test_dir},
    };
    use weir_client::record_batch::build_batch;

    fn config() -> LogConfig {
        LogConfig {
            index_interval_bytes: 1000,
            ..LogConfig::default()
        }
    }

    /// Appends one batch of 3 records whose values are `bytes` bytes of `seed`.
    fn append_batch(s: &mut Segment, seed: u64, bytes: usize) {
        let batch = build_batch(3, &vec![seed as u8; bytes], seed as i64);
        let p = ProducePayload::validate(Bytes::from(batch), 1 << 20).expect("valid");
        for b in p.batches() {
            s.append(&b, s.next_offset(), 0);
        }
    }

    /// Writes and fdatasyncs what was appended, sealing the segment first when `seal`.
    async fn flush(s: &mut Segment, seal: bool) {
        if seal {
            s.start_sealing();
        }
        let (flush, _) = s.begin_flush().expect("dirty");
        let size = flush.size();
        flush.run(true).await.expect("flush");
        s.complete_flush(size, seal, true);
    }

    /// A sealed segment of 20 batches of 3 records, about 600 bytes each.
    async fn sealed_segment(dir: &Path) -> Segment {
        let mut s = Segment::create(dir, Offset(0), &config(), 0, &ZeroFillSlot::new(), None)
            .await
            .expect("create");
        for i in 0..20u64 {
            append_batch(&mut s, i, 500);
        }
        flush(&mut s, true).await;
        s
    }

    #[test]
    fn sealed_segments_reopen_clean_with_the_same_indexes() {
        let dir = test_dir();
        run(async move {
            let s = sealed_segment(dir.path()).await;
            assert_eq!(
                std::fs::metadata(&s.paths.log).expect("log").len(),
                s.size(),
                "exact length"
            );
            let (again, report) = Segment::open(dir.path(), Offset(0), &config(), 0, None)
                .await
                .expect("open");
            assert_eq!(
                report,
                RecoveryReport {
                    batches_replayed: report.batches_replayed,
                    ..RecoveryReport::default()
                }
            );
            assert!(
                report.batches_replayed <= 3,
                "replay starts at the last index entry"
            );
            assert_eq!(again.index, s.index);
            assert_eq!(again.next_offset(), Offset(60));
        });
    }

    /// Sealing leaves a zero-fill tail shorter than an eighth of the data in place (cutting
    /// it would trim blocks a recycled file needs again) and a reopen ends the log at its
    /// last batch all the same; a tail longer than that is cut (the test above).
    #[test]
    fn a_sealed_log_keeps_a_short_tail_and_reopens_at_its_last_batch() {
        let dir = test_dir();
        run(async move {
            let config = LogConfig {
                growth: crate::storage::config::FileGrowth::ZeroFill {
                    step_bytes: 64 << 10,
                },
                ..config()
            };
            let mut s = Segment::create(
                dir.path(),
                Offset(0),
                &config,
                0,
                &ZeroFillSlot::new(),
                None,
            )
            .await
            .expect("create");
            for i in 0..200u64 {
                append_batch(&mut s, i, 1700);
                if i % 20 == 19 {
                    flush(&mut s, false).await;
                }
            }
            flush(&mut s, true).await;
            let len = std::fs::metadata(&s.paths.log).expect("log").len();
            assert!(
                len > s.size(),
                "the zero tail stays: {len} for {}",
                s.size()
            );
            assert!(len - s.size() <= s.size() / 8, "{len} for {}", s.size());
            let (again, report) = Segment::open(dir.path(), Offset(0), &config, 0, None)
                .await
                .expect("open");
            assert_eq!(report.truncated_bytes, 0, "zeros are padding, not damage");
            assert_eq!(again.next_offset(), Offset(600));
            assert_eq!(again.size(), s.size());
            assert_eq!(again.index, s.index);
        });
    }

    #[test]
    fn an_index_entry_pointing_at_no_batch_falls_back_to_a_full_replay() {
        let dir = test_dir();
        run(async move {
            let s = sealed_segment(dir.path()).await;
            let mut index = s.index.offsets().clone();
            let last = *index.entries().last().expect("entries");
            // Still increasing and inside the file, but in the middle of a batch.
            index.push(OffsetEntry {
                relative_offset: last.relative_offset + 1,
                position: last.position + 7,
            });
            std::fs::write(&s.paths.index, index.encode()).expect("write");
            let (again, report) = Segment::open(dir.path(), Offset(0), &config(), 0, None)
                .await
                .expect("open");
            assert!(report.index_rebuilt);
            assert_eq!(report.truncated_bytes, 0, "{report:?}");
            assert_eq!(report.batches_replayed, 20);
            assert_eq!(again.index, s.index);
        });
    }

    #[test]
    fn a_batch_whose_offsets_do_not_follow_ends_the_log() {
        let dir = test_dir();
        run(async move {
            let s = sealed_segment(dir.path()).await;
            let mut bytes = std::fs::read(&s.paths.log).expect("read");
            // The 11th batch claims base offset 999 (outside the CRC, so only the
            // continuity check can catch it).
            let at = 10 * (bytes.len() / 20);
            bytes[at..at + 8].copy_from_slice(&999i64.to_be_bytes());
            std::fs::write(&s.paths.log, &bytes).expect("write");
            std::fs::remove_file(&s.paths.index).expect("drop index");
            let (again, report) = Segment::open(dir.path(), Offset(0), &config(), 0, None)
                .await
                .expect("open");
            assert_eq!(again.next_offset(), Offset(30));
            assert_eq!(report.truncated_bytes, (bytes.len() - at) as u64);
            assert!(report
                .truncation_reason
                .expect("reason")
                .contains("does not follow"));
        });
    }
}
