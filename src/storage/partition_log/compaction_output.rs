//! The `.cleaned` file a compaction pass writes for one segment: batches pushed in
//! offset order (checked), runs of batches left with no record folded into one empty
//! filler batch each, the index built as it goes, written in windows at the pass's pace
//! and fsynced when finished — or removed when the pass abandons it.

use std::{path::Path, rc::Rc};

use glommio::io::DmaFile;

use super::compaction_pace::{Pace, READ_WINDOW_BYTES};
use crate::storage::{
    batch_compaction::{filler, FILLER_OFFSETS_MAX},
    config::{FileGrowth, LogConfig},
    segment::open_dma,
    segment_appender::{SegmentAppender, ZeroFillSlot},
    segment_files::remove_if_present,
    segment_index::{IndexedBatch, SegmentIndex},
    Offset, Result, StorageError,
};

/// A run of batches left with no record, waiting to become one filler.
pub(super) struct Run {
    base: u64,
    last: u64,
    timestamp: i64,
    epoch: i32,
}

/// A compacted segment being written.
pub(super) struct Output {
    file: Rc<DmaFile>,
    path: std::path::PathBuf,
    appender: SegmentAppender,
    index: SegmentIndex,
    size: u64,
    next_offset: Offset,
    pending: Vec<Vec<u8>>,
    error: Option<StorageError>,
}

/// What [`Output::finish`] wrote.
pub(super) struct Written {
    pub(super) index: SegmentIndex,
    pub(super) size: u64,
    pub(super) next_offset: Offset,
}

impl Output {
    pub(super) async fn create(path: &Path, base: Offset, config: &LogConfig) -> Result<Output> {
        let file = open_dma(path).await?;
        file.truncate(0)
            .await
            .map_err(|e| StorageError::io("truncate", path, e))?;
        let appender = SegmentAppender::open(
            Rc::clone(&file),
            path.to_path_buf(),
            0,
            FileGrowth::Append,
            READ_WINDOW_BYTES,
            ZeroFillSlot::new(),
        )
        .await?;
        Ok(Output {
            file,
            path: path.to_path_buf(),
            appender,
            index: SegmentIndex::new(base, config.index_interval_bytes),
            size: 0,
            next_offset: base,
            pending: Vec::new(),
            error: None,
        })
    }

    pub(super) fn push(&mut self, bytes: Vec<u8>, base: u64, last: u64, max_timestamp: i64) {
        if base != self.next_offset.0 && self.error.is_none() {
            self.error = Some(StorageError::Corrupt {
                path: self.path.clone(),
                position: self.size,
                detail: format!(
                    "compacted batch at {base} does not follow {}",
                    self.next_offset
                ),
            });
        }
        self.index.track(IndexedBatch {
            position: crate::storage::FilePosition(self.size),
            base_offset: Offset(base),
            last_offset: Offset(last),
            max_timestamp,
            bytes: bytes.len() as u64,
        });
        self.size += bytes.len() as u64;
        self.next_offset = Offset(last + 1);
        self.pending.push(bytes);
    }

    /// Adds the offsets `base..=last` of a batch that goes to the run of offsets a
    /// filler stands for, starting a new run when the leader epoch changes or the run
    /// is as long as a filler may be.
    pub(super) fn extend_run(
        &mut self,
        run: &mut Option<Run>,
        base: u64,
        last: u64,
        timestamp: i64,
        epoch: i32,
    ) {
        match run {
            Some(r) if r.epoch == epoch && last - r.base < FILLER_OFFSETS_MAX => {
                r.last = last;
                r.timestamp = r.timestamp.max(timestamp);
            }
            _ => {
                self.flush_run(run);
                *run = Some(Run {
                    base,
                    last,
                    timestamp,
                    epoch,
                });
            }
        }
    }

    pub(super) fn flush_run(&mut self, run: &mut Option<Run>) {
        if let Some(r) = run.take() {
            self.push(
                filler(r.base, r.last, r.timestamp, r.epoch),
                r.base,
                r.last,
                r.timestamp,
            );
        }
    }

    /// Writes what is pending once it is worth a write.
    pub(super) async fn drain(&mut self, pace: &mut Pace, all: bool) -> Result<()> {
        let pending: usize = self.pending.iter().map(Vec::len).sum();
        if pending < READ_WINDOW_BYTES && !all {
            return Ok(());
        }
        for bytes in self.pending.drain(..) {
            self.appender.append(&[&bytes]);
        }
        if let Some(write) = self.appender.begin_flush() {
            write.run(false).await?;
        }
        pace.spend(pending as u64).await;
        Ok(())
    }

    pub(super) async fn finish(mut self, pace: &mut Pace) -> Result<Written> {
        if let Some(e) = self.error.take() {
            self.abandon().await;
            return Err(e);
        }
        self.drain(pace, true).await?;
        self.file
            .truncate(self.size)
            .await
            .map_err(|e| StorageError::io("truncate", &self.path, e))?;
        self.file
            .fdatasync()
            .await
            .map_err(|e| StorageError::io("fdatasync", &self.path, e))?;
        self.index.seal_time_entry();
        Ok(Written {
            index: self.index,
            size: self.size,
            next_offset: self.next_offset,
        })
    }

    pub(super) async fn abandon(self) {
        let path = self.path.clone();
        let _ = glommio::executor()
            .spawn_blocking(move || remove_if_present(&path))
            .await;
    }
}
