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
const WALK_WINDOW_BYTES: usize = 16 << 10;

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
    pub async fn find(
        &self,
        start: FilePosition,
        wanted: impl Fn(&BatchHeader) -> bool,
    ) -> Result<Option<(FilePosition, BatchHeader)>> {
        let mut position = start.0;
        while position < self.limit.0 {
            let window = self.fetch(position, WALK_WINDOW_BYTES).await?.bytes;
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
    /// at most `max_bytes` in total except that the first batch is always returned whole
    /// (Kafka's rule, so a consumer can always make progress). `start` must be a batch
    /// boundary at or before that batch. `None` when no such batch is below the limit.
    pub async fn read_batches(
        &self,
        start: FilePosition,
        target: i64,
        max_bytes: usize,
    ) -> Result<Option<Bytes>> {
        let Some((first, header)) = self.find(start, |h| h.last_offset() >= target).await? else {
            return Ok(None);
        };
        let fetched = self
            .fetch(first.0, header.total_bytes.max(max_bytes))
            .await?;
        let bytes = fetched.bytes;
        let mut end = 0usize;
        while end + HEADER_BYTES <= bytes.len() {
            let h = self.header_at(&bytes[end..], first.0 + end as u64)?;
            if end + h.total_bytes > bytes.len() || (end > 0 && end + h.total_bytes > max_bytes) {
                break;
            }
            if fetched.from_disk {
                record_batch::check(&bytes[end..end + h.total_bytes], usize::MAX)
                    .map_err(|e| self.corrupt(first.0 + end as u64, e.to_string()))?;
            }
            end += h.total_bytes;
        }
        if end == 0 {
            return Err(self.corrupt(first.0, "batch runs past the readable end"));
        }
        Ok(Some(bytes.slice(..end)))
    }
}
