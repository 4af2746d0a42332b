//! What a clean close leaves for the next open: the active segment's file kept whole.
//!
//! Closing a log seals its active segment without cutting its file past the data. That
//! file is usually a recycled one, or has zero-fill ahead of its data: cutting it freed
//! blocks (a trim on a discard-mounted disk) which the reopened segment then zero-filled
//! again — measured before this, with 256 MiB segments, a restart of a broker at
//! 200,000 msgs/s cut ~175 MB per partition at the stop and wrote 0.5–0.7 GB of zeros
//! in its first 10 s (`benches/clean_restart.sh`).
//!
//! After a crash recovery must still cut the log after its last intact batch: bytes past
//! it may be the log's own writes that were never acknowledged, and appends at the same
//! offsets could line up with them and bring them back at a later recovery. Past a clean
//! close there are none — every append was made durable first — so the close records
//! [`CleanClose`] in the partition directory, and the next open keeps the tail only when
//! the segment's file still has the recorded length and recovery ends its data exactly
//! where the record says (a record that outlived a downgrade, whose build cut or grew
//! the file, is not trusted). The record is removed
//! durably (unlinked, the directory fsynced) as the open reads it, before recovery and
//! long before an append: a crash after the open finds no record and cuts as always.

use std::path::Path;

use crate::storage::{
    recovery::CleanEnd,
    segment_files::{remove_if_present, SegmentPaths},
    Offset, Result, StorageError,
};

/// The record's file name in a partition directory.
pub const CLEAN_CLOSE_FILE: &str = "clean-close";

/// First word of the record: its format.
const VERSION: &str = "v1";

/// Where a cleanly closed log's active segment ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanClose {
    /// Base offset of the segment that was active.
    pub base: Offset,
    /// Where its data and its log file ended.
    pub end: CleanEnd,
    /// How far its file was durably written (data, zeros or a recycled file's stale
    /// bytes): appends below it overwrite allocated blocks in place.
    pub written_end: u64,
}

impl CleanClose {
    fn encode(&self) -> String {
        format!(
            "{VERSION} {} {} {} {}\n",
            self.base.0, self.end.data, self.end.file, self.written_end
        )
    }

    /// The record in `text`, or `None` unless it is one whole record (a torn write
    /// leaves a prefix, which is not).
    fn decode(text: &str) -> Option<CleanClose> {
        let line = text.strip_suffix('\n')?;
        let mut words = line.split(' ');
        if words.next()? != VERSION {
            return None;
        }
        let mut number = || words.next()?.parse::<u64>().ok();
        let record = CleanClose {
            base: Offset(number()?),
            end: CleanEnd {
                data: number()?,
                file: number()?,
            },
            written_end: number()?,
        };
        words.next().is_none().then_some(record)
    }
}

/// Records in `dir` durably that the log's active segment, with base offset `base`,
/// holds `size` bytes of data and its file is durably written to `written_end` (the
/// record also takes the file's length): the record is written and fdatasynced, and
/// the directory fsynced. Call once the log's last appends and its seal are durable.
pub async fn record(dir: &Path, base: Offset, size: u64, written_end: u64) -> Result<()> {
    let dir = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            let log = SegmentPaths::new(&dir, base).log;
            let file = std::fs::metadata(&log)
                .map_err(|e| StorageError::io("stat", &log, e))?
                .len();
            let record = CleanClose {
                base,
                end: CleanEnd { data: size, file },
                written_end,
            };
            let path = dir.join(CLEAN_CLOSE_FILE);
            let write = || -> std::io::Result<()> {
                use std::io::Write;
                let mut f = std::fs::File::create(&path)?;
                f.write_all(record.encode().as_bytes())?;
                f.sync_data()?;
                std::fs::File::open(&dir)?.sync_all()
            };
            write().map_err(|e| StorageError::io("write", &path, e))
        })
        .await
}

/// Reads and removes the record in `dir`, if any: once this returns the removal is
/// durable. An unreadable record is reported and counts as none.
pub async fn take(dir: &Path) -> Result<Option<CleanClose>> {
    let dir = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            let path = dir.join(CLEAN_CLOSE_FILE);
            let text = match std::fs::read(&path) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(StorageError::io("read", &path, e)),
            };
            remove_if_present(&path)?;
            std::fs::File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StorageError::io("fsync dir", &dir, e))?;
            let record = std::str::from_utf8(&text).ok().and_then(CleanClose::decode);
            if record.is_none() {
                tracing::warn!(path = %path.display(), "ignoring an unreadable clean-close record; the log is recovered as after a crash");
            }
            Ok(record)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_support::{run, test_dir};

    #[test]
    fn a_record_reads_back_only_whole() {
        let r = CleanClose {
            base: Offset(1 << 40),
            end: CleanEnd {
                data: 123_456,
                file: 270_548_992,
            },
            written_end: 268_435_456,
        };
        let text = r.encode();
        assert_eq!(CleanClose::decode(&text), Some(r));
        for cut in 0..text.len() {
            assert_eq!(CleanClose::decode(&text[..cut]), None, "torn at {cut}");
        }
        assert_eq!(CleanClose::decode("v1 1 2 3 4 5\n"), None);
        assert_eq!(CleanClose::decode("v2 1 2 3 4\n"), None);
        assert_eq!(CleanClose::decode("v1 1 -2 3 4\n"), None);
    }

    #[test]
    fn taking_a_record_removes_it() {
        let dir = test_dir();
        run(async move {
            let d = dir.path();
            assert_eq!(take(d).await.expect("none"), None);
            std::fs::write(SegmentPaths::new(d, Offset(7)).log, [0u8; 12_288]).expect("log");
            record(d, Offset(7), 4096, 8192).await.expect("record");
            let r = CleanClose {
                base: Offset(7),
                end: CleanEnd {
                    data: 4096,
                    file: 12_288,
                },
                written_end: 8192,
            };
            assert_eq!(take(d).await.expect("take"), Some(r));
            assert!(!d.join(CLEAN_CLOSE_FILE).exists());
            assert_eq!(take(d).await.expect("taken"), None);
            std::fs::write(d.join(CLEAN_CLOSE_FILE), b"v1 7 40").expect("torn");
            assert_eq!(take(d).await.expect("garbled"), None);
            assert!(!d.join(CLEAN_CLOSE_FILE).exists(), "removed all the same");
        });
    }
}
