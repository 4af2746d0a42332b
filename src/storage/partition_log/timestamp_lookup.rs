//! Finding an offset by time, as ListOffsets does.

use super::PartitionLog;
use crate::storage::{
    batch_records::{record_times, RecordTime},
    record_batch::RecordBatch,
    segment::Segment,
    segment_index::NO_TIMESTAMP,
    segment_reader::WALK_WINDOW_BYTES,
    Offset, Result,
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

impl PartitionLog {
    /// Finds an offset by time, as ListOffsets does, to the record: `At` returns the first
    /// record whose timestamp reaches the target, `MaxTimestamp` the first record holding
    /// the largest timestamp. The sparse time index and the batch headers find the one
    /// batch that holds the answer; only that batch's records are decoded
    /// (decompressed if need be). A batch whose records cannot be read answers at the
    /// batch (its base offset and max timestamp), as before records were decoded. Only
    /// data below the high watermark is considered; `None` when nothing qualifies.
    pub async fn offset_for_timestamp(
        &self,
        query: TimestampQuery,
    ) -> Result<Option<TimestampOffset>> {
        let target = match query {
            TimestampQuery::Earliest | TimestampQuery::Latest | TimestampQuery::MaxTimestamp => {
                let found = {
                    let st = self.shared.state.borrow();
                    match query {
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
                    }
                };
                return Ok(match (query, found) {
                    (TimestampQuery::MaxTimestamp, Some(batch)) => {
                        Some(self.to_record(batch, |r, max| r.timestamp == max).await)
                    }
                    (_, found) => found,
                });
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
                let batch = TimestampOffset {
                    offset: Offset(h.base_offset as u64),
                    timestamp: h.max_timestamp,
                };
                // As Kafka does: the first record of that batch at or past the target,
                // wherever the index pointed into it.
                return Ok(Some(
                    self.to_record(batch, |r, _| r.timestamp >= target).await,
                ));
            }
        }
    }

    /// The first record of the batch holding `batch.offset` that `wanted` picks (given
    /// the batch's max timestamp), or `batch` itself when the records cannot be read or
    /// none is picked.
    async fn to_record(
        &self,
        batch: TimestampOffset,
        wanted: impl Fn(&RecordTime, i64) -> bool,
    ) -> TimestampOffset {
        let found = async {
            let read = self.read(batch.offset, 1).await.ok()?;
            let (stored, _) = RecordBatch::validate_stored(&read.records, usize::MAX).ok()?;
            let base = u64::try_from(stored.base_offset()).ok()?;
            let times = match record_times(&stored) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(dir = %self.dir().display(), base, error = %e, "cannot read a batch's records; answering at the batch");
                    return None;
                }
            };
            times
                .iter()
                .find(|r| wanted(r, stored.max_timestamp()))
                .map(|r| TimestampOffset {
                    offset: Offset(base + u64::from(r.offset_delta)),
                    timestamp: r.timestamp,
                })
        }
        .await;
        found.unwrap_or(batch)
    }
}
