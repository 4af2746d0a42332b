//! DeleteRecords: moving a log's start offset forward on request. The new log start is
//! written to the partition's `log-start-offset` file (atomically, fsynced) before any
//! reader sees it, so a restart never brings deleted records back; segments wholly below
//! it are then deleted. Records below it that share a segment with records above stay on
//! disk but are never served (reads below the log start are OFFSET_OUT_OF_RANGE).

use std::path::Path;

use super::{retention::Retired, PartitionLog};
use crate::storage::{Offset, Result, StorageError};

/// The file in a partition directory that holds its log start offset, when DeleteRecords
/// moved it past the first segment's base.
pub const LOG_START_FILE: &str = "log-start-offset";

/// The log start offset recorded in `dir`, if any. Blocking-pool I/O.
pub(super) async fn read_log_start(dir: &Path) -> Result<Option<Offset>> {
    let path = dir.join(LOG_START_FILE);
    glommio::executor()
        .spawn_blocking(move || match std::fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| StorageError::Corrupt {
                    path: path.clone(),
                    position: 0,
                    detail: format!("{:?} is not an offset", text.trim()),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StorageError::io("read", &path, e)),
        })
        .await
}

/// Writes `offset` as `dir`'s log start offset: a temporary file, fsynced, renamed over
/// the old one. The caller syncs the directory.
async fn write_log_start(dir: &Path, offset: Offset) -> Result<()> {
    let path = dir.join(LOG_START_FILE);
    let tmp = dir.join(format!("{LOG_START_FILE}.tmp"));
    glommio::executor()
        .spawn_blocking(move || {
            use std::io::Write;
            let mut f =
                std::fs::File::create(&tmp).map_err(|e| StorageError::io("create", &tmp, e))?;
            f.write_all(format!("{offset}\n").as_bytes())
                .and_then(|()| f.sync_data())
                .map_err(|e| StorageError::io("write", &tmp, e))?;
            std::fs::rename(&tmp, &path).map_err(|e| StorageError::io("rename", &path, e))
        })
        .await
}

impl PartitionLog {
    /// Moves the log start offset to `before` (records below it are deleted), durably,
    /// and deletes the segments wholly below it. `before` may be at most the high
    /// watermark (OFFSET_OUT_OF_RANGE past it); at or below the current log start it
    /// changes nothing. Returns the log start offset afterwards (Kafka's low watermark).
    pub async fn delete_records(&self, before: Offset) -> Result<Offset> {
        let shared = &self.shared;
        let _permit = self.lock_appends().await?;
        let _maintenance = self.lock_maintenance().await?;
        {
            let st = shared.state.borrow();
            self.refuse(&st)?;
            if before > st.high_watermark {
                return Err(StorageError::OffsetOutOfRange {
                    requested: before,
                    log_start: st.log_start,
                    high_watermark: st.high_watermark,
                });
            }
            if before <= st.log_start {
                return Ok(st.log_start);
            }
        }
        write_log_start(&shared.dir, before).await?;
        self.sync_dir().await?;
        let (log_start, doomed) = {
            let mut st = shared.state.borrow_mut();
            st.log_start = st.log_start.max(before);
            let log_start = st.log_start;
            st.txns.forget_below(log_start);
            // Whole segments below the new start, never the active one.
            let n = st
                .segments
                .iter()
                .take(st.segments.len().saturating_sub(1))
                .take_while(|s| {
                    s.next_offset() <= log_start && s.is_sealed_or_sealing() && !s.needs_flush()
                })
                .count();
            let doomed: Vec<Retired> = st
                .segments
                .drain(..n)
                .map(|s| Retired::new(shared.env.id, s))
                .collect();
            (log_start, doomed)
        };
        self.retire(doomed).await?;
        Ok(log_start)
    }
}
