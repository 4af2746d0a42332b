//! Reading stored batches back from one segment: from the batch cache when it holds the
//! range, otherwise with aligned DMA reads of the `.log` file.
//!
//! A reader is a snapshot: it reads no further than the `limit` it was created with (the
//! segment's flushed end when the read began), so it never returns bytes above the high
//! watermark even while appends continue. Batches read from disk have their CRC-32C
//! checked before they are returned; batches from the cache were checked on append.

use std::{path::PathBuf, rc::Rc};

use bytes::Bytes;
use glommio::io::DmaFile;

use super::{
    batch_cache::{BatchCache, SegmentKey},
    config::STORED_BATCH_BYTES_MAX,
    record_batch::{self, BatchHeader, HEADER_BYTES, MAGIC_V2},
    FilePosition, Result, StorageError,
};

/// Bytes read per step while walking batch headers to find a starting batch.
pub const WALK_WINDOW_BYTES: usize = 16 << 10;

/// Bytes read per step while walking every header of a long stretch of log.
pub const SCAN_WINDOW_BYTES: usize = 1 << 20;

/// Reads batches of one segment up to a fixed limit.
pub struct SegmentReader {
    /// The segment's `.log`, opened for DMA.
    pub file: Rc<DmaFile>,
    /// Its path, for errors.
    pub path: PathBuf,
    /// The segment's identity in the cache.
    pub key: SegmentKey,
    /// The shard's cache.
    pub cache: Rc<BatchCache>,
    /// Nothing at or past this position is read.
    pub limit: FilePosition,
}

struct Fetched {
    bytes: Bytes,
    from_disk: bool,
}

/// Whole stored batches a read returned, and the offset of the last record of the last
/// one (`None` when there are none): read off the headers the read walks anyway.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Batches {
    /// The batches, exactly as stored.
    pub bytes: Bytes,
    /// The offset of the last record in `bytes`.
    pub last_offset: Option<i64>,
}

impl SegmentReader {
    async fn fetch(&self, position: u64, len: usize) -> Result<Fetched> {
        let len = len.min((self.limit.0.saturating_sub(position)) as usize);
        if len == 0 {
            return Ok(Fetched {
                bytes: Bytes::new(),
                from_disk: false,
            });
        }
        if let Some(bytes) = self.cache.read(self.key, FilePosition(position), len) {
            return Ok(Fetched {
                bytes,
                from_disk: false,
            });
        }
        let read = self
            .file
            .read_at(position, len)
            .await
            .map_err(|e| StorageError::io("read", &self.path, e))?;
        Ok(Fetched {
            bytes: Bytes::copy_from_slice(&read[..read.len().min(len)]),
            from_disk: true,
        })
    }

    fn corrupt(&self, position: u64, detail: impl Into<String>) -> StorageError {
        StorageError::Corrupt {
            path: self.path.clone(),
            position,
            detail: detail.into(),
        }
    }

    fn header_at(&self, bytes: &[u8], position: u64) -> Result<BatchHeader> {
        let h = BatchHeader::parse(bytes)
            .ok_or_else(|| self.corrupt(position, "unreadable batch header"))?;
        if h.magic != MAGIC_V2 || h.total_bytes > STORED_BATCH_BYTES_MAX || h.last_offset_delta < 0
        {
            return Err(self.corrupt(position, format!("implausible batch header {h:?}")));
        }
        Ok(h)
    }

    /// The first batch at or after `start` (a batch boundary) for which `wanted` holds,
    /// with its position; `None` when the segment ends first.
    /// Reads `window_bytes` at a time ([`WALK_WINDOW_BYTES`] when the batch is expected
    /// near `start`, [`SCAN_WINDOW_BYTES`] to visit everything).
    pub async fn find(
        &self,
        start: FilePosition,
        window_bytes: usize,
        wanted: impl Fn(&BatchHeader) -> bool,
    ) -> Result<Option<(FilePosition, BatchHeader)>> {
        let mut position = start.0;
        while position < self.limit.0 {
            let window = self.fetch(position, window_bytes).await?.bytes;
            if window.len() < HEADER_BYTES {
                return Err(self.corrupt(position, "segment ends inside a batch header"));
            }
            let mut cursor = 0usize;
            while cursor + HEADER_BYTES <= window.len() {
                let at = position + cursor as u64;
                let h = self.header_at(&window[cursor..], at)?;
                if wanted(&h) {
                    return Ok(Some((FilePosition(at), h)));
                }
                cursor += h.total_bytes;
            }
            position += cursor as u64;
        }
        Ok(None)
    }

    /// Whole batches starting with the first whose last offset is at least `target`,
    /// none starting at or past offset `below`, at most `max_bytes` in total except that
    /// the first batch is always returned whole (Kafka's rule, so a consumer can always
    /// make progress). `start` must be a batch boundary at or before that batch. `None`
    /// when no such batch is below the limit; empty when it starts at or past `below`.
    pub async fn read_batches(
        &self,
        start: FilePosition,
        target: i64,
        below: i64,
        max_bytes: usize,
    ) -> Result<Option<Batches>> {
        let Some((first, header)) = self
            .find(start, WALK_WINDOW_BYTES, |h| h.last_offset() >= target)
            .await?
        else {
            return Ok(None);
        };
        if header.base_offset >= below {
            return Ok(Some(Batches::default()));
        }
        let fetched = self
            .fetch(first.0, header.total_bytes.max(max_bytes))
            .await?;
        let bytes = fetched.bytes;
        let mut end = 0usize;
        let mut last_offset = None;
        while end + HEADER_BYTES <= bytes.len() {
            let h = self.header_at(&bytes[end..], first.0 + end as u64)?;
            if end + h.total_bytes > bytes.len()
                || (end > 0 && (end + h.total_bytes > max_bytes || h.base_offset >= below))
            {
                break;
            }
            if fetched.from_disk {
                record_batch::check_stored(&bytes[end..end + h.total_bytes], usize::MAX)
                    .map_err(|e| self.corrupt(first.0 + end as u64, e.to_string()))?;
            }
            end += h.total_bytes;
            last_offset = Some(h.last_offset());
        }
        if end == 0 {
            return Err(self.corrupt(first.0, "batch runs past the readable end"));
        }
        Ok(Some(Batches {
            bytes: bytes.slice(..end),
            last_offset,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{
        config::FileGrowth,
        segment::open_dma,
        segment_appender::{SegmentAppender, ZeroFillSlot},
        test_support::{run, test_dir},
    };
    use weir_client::record_batch::build_batch;

    /// Writes ten batches (offsets 0..30) to a file; returns the file and the bytes.
    async fn written(path: &std::path::Path) -> (Rc<DmaFile>, Vec<u8>, Rc<BatchCache>, SegmentKey) {
        let file = open_dma(path).await.expect("open");
        let mut a = SegmentAppender::open(
            Rc::clone(&file),
            path.to_path_buf(),
            0,
            FileGrowth::Append,
            64 << 10,
            ZeroFillSlot::new(),
        )
        .await
        .expect("appender");
        let mut all = Vec::new();
        for i in 0..10u64 {
            let mut b = build_batch(3, &[i as u8; 500], 0);
            b[..8].copy_from_slice(&(i as i64 * 3).to_be_bytes());
            a.append(&[&b]);
            all.extend_from_slice(&b);
        }
        let flush = a.begin_flush().expect("dirty");
        let cache = Rc::new(BatchCache::new(1 << 20));
        let key = SegmentKey {
            log_id: 1,
            base_offset: 0,
        };
        cache.insert(key, flush.chunks());
        flush.run(true).await.expect("flush");
        (file, all, cache, key)
    }

    #[test]
    fn cache_and_disk_return_the_same_batches() {
        let dir = test_dir();
        let path = dir.path().join("r.log");
        run(async move {
            let (file, all, cache, key) = written(&path).await;
            let limit = FilePosition(all.len() as u64);
            let cached = SegmentReader {
                file: Rc::clone(&file),
                path: path.clone(),
                key,
                cache,
                limit,
            };
            let disk = SegmentReader {
                file,
                path: path.clone(),
                key,
                cache: Rc::new(BatchCache::new(0)),
                limit,
            };
            for target in [0i64, 4, 29] {
                let a = cached
                    .read_batches(FilePosition(0), target, i64::MAX, 1200)
                    .await
                    .expect("cache")
                    .expect("found");
                let b = disk
                    .read_batches(FilePosition(0), target, i64::MAX, 1200)
                    .await
                    .expect("disk")
                    .expect("found");
                assert_eq!(a, b);
                let first = BatchHeader::parse(&a.bytes).expect("header");
                assert!(first.base_offset <= target && first.last_offset() >= target);
            }
            assert!(disk
                .read_batches(FilePosition(0), 30, i64::MAX, 100)
                .await
                .expect("read")
                .is_none());
        });
    }

    #[test]
    fn disk_reads_check_the_crc() {
        let dir = test_dir();
        let path = dir.path().join("r.log");
        run(async move {
            let (file, all, _, key) = written(&path).await;
            let mut damaged = std::fs::read(&path).expect("read");
            damaged[100] ^= 0xff;
            std::fs::write(&path, &damaged).expect("write");
            let disk = SegmentReader {
                file,
                path: path.clone(),
                key,
                cache: Rc::new(BatchCache::new(0)),
                limit: FilePosition(all.len() as u64),
            };
            let err = disk
                .read_batches(FilePosition(0), 0, i64::MAX, 1 << 20)
                .await
                .expect_err("corrupt");
            assert!(
                matches!(err, StorageError::Corrupt { position: 0, .. }),
                "{err}"
            );
        });
    }
}
