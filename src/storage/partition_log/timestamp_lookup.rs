//! Finding an offset by time, as ListOffsets does.

use super::PartitionLog;
use crate::storage::{
    segment::Segment, segment_index::NO_TIMESTAMP, segment_reader::WALK_WINDOW_BYTES, Offset,
    Result,
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
    /// Finds an offset by time, as ListOffsets does. Timestamps resolve to batches: `At`
    /// returns the base offset of the first batch whose max timestamp reaches the target
    /// (records are not decoded), `MaxTimestamp` the last offset of the batch holding the
    /// largest timestamp. Only data below the high watermark is considered; `None` when
    /// nothing qualifies.
    pub async fn offset_for_timestamp(
        &self,
        query: TimestampQuery,
    ) -> Result<Option<TimestampOffset>> {
        let target = match query {
            TimestampQuery::Earliest | TimestampQuery::Latest | TimestampQuery::MaxTimestamp => {
                let st = self.shared.state.borrow();
                let found = match query {
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
                };
                return Ok(found);
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
                return Ok(Some(TimestampOffset {
                    offset: Offset(h.base_offset as u64),
                    timestamp: h.max_timestamp,
                }));
            }
        }
    }
}
