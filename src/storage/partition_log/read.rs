//! Reading a partition's log: whole stored batches from the one holding an offset, up
//! to a bound (the high watermark for consumers, everything durable here for followers,
//! the last stable offset for `read_committed` readers).

use std::rc::Rc;

use bytes::Bytes;

use super::{LogState, PartitionLog};
use crate::storage::{
    batch_cache::SegmentKey, segment::Segment, segment_reader::SegmentReader, Offset, Result,
    StorageError,
};

/// What a read returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRead {
    /// Whole stored batches, exactly as stored; empty at the high watermark.
    pub records: Bytes,
    /// The offset of the last record in `records` (`None` when they are empty).
    pub last_offset: Option<Offset>,
    /// The high watermark when the read began.
    pub high_watermark: Offset,
    /// The log start offset when the read began.
    pub log_start_offset: Offset,
}

impl PartitionLog {
    /// Stored batches starting with the one that contains `offset`, at most `max_bytes`
    /// except that the first batch is always whole (Kafka's fetch rule), never at or past
    /// the high watermark, all from one segment. Fails with `OffsetOutOfRange` outside
    /// `[log start, log end]`; at or past the high watermark the records are empty.
    pub async fn read(&self, offset: Offset, max_bytes: usize) -> Result<LogRead> {
        self.read_below(offset, max_bytes, |st| st.high_watermark)
            .await
    }

    /// What a follower replicating this log reads: as [`read`](Self::read), but up to
    /// everything durable here rather than the high watermark.
    pub async fn read_replica(&self, offset: Offset, max_bytes: usize) -> Result<LogRead> {
        self.read_below(offset, max_bytes, |st| st.durable_end)
            .await
    }

    pub(super) async fn read_below(
        &self,
        offset: Offset,
        max_bytes: usize,
        bound: impl Fn(&LogState) -> Offset,
    ) -> Result<LogRead> {
        let mut segment_index = None;
        loop {
            let (reader, start, read, below) = {
                let st = self.shared.state.borrow();
                if st.closed {
                    return Err(StorageError::Closed(self.shared.dir.clone()));
                }
                let read = LogRead {
                    records: Bytes::new(),
                    last_offset: None,
                    high_watermark: st.high_watermark,
                    log_start_offset: st.log_start,
                };
                if offset < st.log_start || offset > st.log_end {
                    return Err(StorageError::OffsetOutOfRange {
                        requested: offset,
                        log_start: st.log_start,
                        high_watermark: st.high_watermark,
                    });
                }
                if offset >= bound(&st) {
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
                let below = bound(&st).to_wire();
                (
                    self.reader(segment),
                    segment.index().lookup(offset),
                    read,
                    below,
                )
            };
            if let Some(batches) = reader
                .read_batches(start, offset.0 as i64, below, max_bytes)
                .await?
            {
                return Ok(LogRead {
                    records: batches.bytes,
                    last_offset: batches
                        .last_offset
                        .and_then(|o| u64::try_from(o).ok().map(Offset)),
                    ..read
                });
            }
        }
    }

    pub(super) fn reader(&self, segment: &Segment) -> SegmentReader {
        SegmentReader {
            file: Rc::clone(&segment.log_file),
            path: segment.paths.log.clone(),
            key: SegmentKey {
                log_id: self.shared.env.id,
                base_offset: segment.base().0,
            },
            cache: Rc::clone(&self.shared.env.cache),
            limit: segment.flushed_size(),
        }
    }
}
