//! Retention: deleting whole sealed segments from the start of the log by age or size.

use std::{path::Path, rc::Rc};

use glommio::io::{Directory, DmaFile};

use super::PartitionLog;
use crate::storage::{
    batch_cache::SegmentKey,
    log_env::LogEnv,
    segment::{Segment, SegmentPaths},
    segment_index::NO_TIMESTAMP,
    Offset, Result,
};

/// A segment taken out of its log, on its way to the shard's pool (or deletion).
pub(super) struct Retired {
    key: SegmentKey,
    paths: SegmentPaths,
    log_file: Option<Rc<DmaFile>>,
    next_offset: Offset,
}

impl Retired {
    /// `segment`, just removed from the log with id `log_id`.
    pub(super) fn new(log_id: u64, segment: Segment) -> Retired {
        Retired {
            key: SegmentKey {
                log_id,
                base_offset: segment.base().0,
            },
            next_offset: segment.next_offset(),
            paths: segment.paths,
            log_file: Some(segment.log_file),
        }
    }

    /// Drops its cached batches and hands its files to the shard's pool.
    async fn retire(&mut self, env: &LogEnv, dir: (&Directory, &Path)) -> Result<()> {
        env.cache.remove_segment(self.key);
        env.pool
            .retire(
                self.paths.clone(),
                self.log_file.take(),
                self.next_offset,
                dir,
            )
            .await
    }
}

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
        let doomed: Vec<Retired> = {
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
            let log_start = st.log_start;
            st.txns.forget_below(log_start);
            removed
                .into_iter()
                .map(|s| Retired::new(shared.env.id, s))
                .collect()
        };
        let n = doomed.len();
        shared.env.metrics.retention_deleted.inc_by(n as u64);
        self.retire(doomed).await?;
        Ok(n)
    }

    /// Hands segments just taken out of the log to the shard's pool, oldest first, after
    /// any that an earlier failure left. A failure stops there and keeps the rest for
    /// the next call: files must leave the directory oldest first, or a reopened log
    /// would find a gap between a leftover and the segments after it.
    pub(super) async fn retire(&self, segments: Vec<Retired>) -> Result<()> {
        let shared = &self.shared;
        shared.state.borrow_mut().unretired.extend(segments);
        loop {
            let next = shared.state.borrow_mut().unretired.pop_front();
            let Some(mut retired) = next else {
                return Ok(());
            };
            if let Err(e) = retired
                .retire(&shared.env, (&shared.dir_handle, &shared.dir))
                .await
            {
                shared.state.borrow_mut().unretired.push_front(retired);
                return Err(e);
            }
        }
    }
}
