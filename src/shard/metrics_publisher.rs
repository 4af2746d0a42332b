//! Publishes what only the shard can read — its partitions' offsets and sizes, the
//! request bytes it holds — into its metrics once a second, so a scrape on the metrics
//! thread never waits for (or reaches into) a shard.

use std::{collections::HashSet, rc::Weak, time::Duration};

use crate::metrics::PartitionOffsets;

use super::context::ShardContext;

/// How often a shard publishes.
pub const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);

/// Publishes every [`PUBLISH_INTERVAL`] until the shard is gone; partitions that left
/// the shard (deleted topics) stop being published.
pub async fn run(ctx: Weak<ShardContext>) {
    let mut published: HashSet<(String, u32)> = HashSet::new();
    let mut groups: HashSet<String> = HashSet::new();
    while let Some(ctx) = ctx.upgrade() {
        let mut now = HashSet::with_capacity(published.len());
        for ((topic, partition), log) in ctx.open_logs() {
            let o = log.offsets();
            ctx.metrics.publish_partition(
                &topic,
                partition,
                PartitionOffsets {
                    log_start: o.log_start.to_wire(),
                    high_watermark: o.high_watermark.to_wire(),
                    log_end: o.log_end.to_wire(),
                    bytes: o.bytes as i64,
                },
            );
            now.insert((topic, partition));
        }
        for (topic, partition) in published.difference(&now) {
            ctx.metrics.forget_partition(topic, *partition);
        }
        published = now;
        let mut groups_now = HashSet::new();
        for (group, _, state) in ctx.coordinator.list(Vec::new()) {
            if let Some((_, generation, members)) = ctx.coordinator.describe(&group) {
                ctx.metrics
                    .publish_group(&group, state.kafka_name(), generation, members);
                groups_now.insert(group);
            }
        }
        for group in groups.difference(&groups_now) {
            ctx.metrics.forget_group(group);
        }
        groups = groups_now;
        let held_kib = ctx.inflight_kib_held();
        ctx.metrics.inflight_bytes.set((held_kib * 1024) as i64);
        drop(ctx);
        glommio::timer::sleep(PUBLISH_INTERVAL).await;
    }
}
