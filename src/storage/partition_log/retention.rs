//! Retention: deleting whole sealed segments from the start of the log by age or size.

use super::PartitionLog;
use crate::storage::{
    batch_cache::SegmentKey,
    segment::{Segment, SegmentPaths},
    segment_index::NO_TIMESTAMP,
    Result,
};

impl PartitionLog {
    /// Deletes whole sealed segments from the start of the log that are past
    /// `retention_age_max` (by their largest timestamp, or their creation time when
    /// they hold none) or that keep the log above `retention_bytes_max`. The active
    /// segment is never deleted, nor anything of a log whose cleanup policy is compact
    /// only. Returns how many segments were deleted.
    pub async fn enforce_retention(&self) -> Result<usize> {
        let shared = &self.shared;
        let now = shared.env.clock.now_ms();
        let config = shared.config.borrow().clone();
        if !config.cleanup.deletes() {
            return Ok(0);
        }
        let _maintenance = self.lock_maintenance().await?;
        let doomed: Vec<(SegmentPaths, SegmentKey)> = {
            let mut st = shared.state.borrow_mut();
            let mut total: u64 = st.segments.iter().map(Segment::size).sum();
            let mut n = 0;
            for s in st.segments.iter() {
                if s.is_sealed_or_sealing() && !s.needs_flush() && n + 1 < st.segments.len() {
                    let newest = match s.index().max_timestamp() {
                        NO_TIMESTAMP => s.created_ms,
                        ts => ts,
                    };
                    let expired = config
                        .retention_age_max
                        .is_some_and(|age| now - newest > age.as_millis() as i64);
                    let oversize = config
                        .retention_bytes_max
                        .is_some_and(|max| total - s.size() >= max);
                    if expired || oversize {
                        total -= s.size();
                        n += 1;
                        continue;
                    }
                }
                break;
            }
            let removed: Vec<Segment> = st.segments.drain(..n).collect();
            if let Some(first) = st.segments.front() {
                st.log_start = st.log_start.max(first.base());
            }
            removed
                .into_iter()
                .map(|s| {
                    (
                        s.paths.clone(),
                        SegmentKey {
                            log_id: shared.env.id,
                            base_offset: s.base().0,
                        },
                    )
                })
                .collect()
        };
        let n = doomed.len();
        shared.env.metrics.retention_deleted.inc_by(n as u64);
        for (paths, key) in doomed {
            shared.env.cache.remove_segment(key);
            Segment::delete_files(paths).await?;
        }
        Ok(n)
    }
}
