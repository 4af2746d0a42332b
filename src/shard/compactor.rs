//! The shard's log compactor: every [`COMPACTION_CHECK_INTERVAL`] it runs a compaction
//! pass (see `storage::partition_log` compaction) over each open partition of a
//! compacted topic that has something new to compact, one partition at a time, paced
//! to `--compaction-rate` (32 MiB/s by default) so produce keeps the device.

use std::{
    rc::Rc,
    time::{Duration, Instant},
};

use super::context::ShardContext;
use crate::storage::partition_log::Pace;

/// How often the compactor looks for work (Kafka's `log.cleaner.backoff.ms` is 15 s;
/// checking is an in-memory test, so it looks more often).
pub const COMPACTION_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// One pass over the shard's open partitions, compacting those with something new to
/// compact, one at a time.
pub(super) async fn pass(ctx: &Rc<ShardContext>) {
    let rate = ctx.config.compaction_rate;
    for ((topic, p), log) in ctx.open_logs() {
        if !log.compaction_due() {
            continue;
        }
        let mut pace = Pace::new(rate);
        let started = Instant::now();
        match log.compact(&mut pace).await {
            Ok(r) if r.segments_rewritten > 0 => {
                let seconds = started.elapsed().as_secs_f64().max(1e-6);
                tracing::info!(
                    topic = %topic,
                    partition = p,
                    segments = r.segments_rewritten,
                    bytes_before = r.bytes_before,
                    bytes_after = r.bytes_after,
                    records_removed = r.records_removed,
                    read_mb_per_s = format!("{:.1}", r.bytes_read as f64 / seconds / 1e6),
                    "compacted"
                );
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(topic = %topic, partition = p, error = %e, "compaction failed")
            }
        }
    }
}
