//! Publishes what only the shard can read — its partitions' offsets and sizes, the
//! request bytes it holds — into its metrics once a second, so a scrape on the metrics
//! thread never waits for (or reaches into) a shard.

use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use crate::metrics::{PartitionGauges, PartitionOffsets};

use super::context::ShardContext;

/// How often a shard publishes.
pub const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);

/// What a shard has published so far: each partition's gauges, kept between
/// publications with the round that last saw it, the followers whose lag it published
/// and the groups published.
#[derive(Default)]
pub(super) struct Publisher {
    published: HashMap<String, HashMap<u32, (PartitionGauges, u64)>>,
    followers: HashSet<(String, u32, i32)>,
    groups: HashSet<String>,
    round: u64,
}

impl Publisher {
    /// One publication, run every [`PUBLISH_INTERVAL`] by the shard's tasks: partitions
    /// that left the shard (deleted topics) stop being published, and a topic none of
    /// whose partitions is left loses its counters' series too.
    pub(super) fn publish(&mut self, ctx: &ShardContext) {
        let Publisher {
            published,
            followers,
            groups,
            round,
        } = self;
        *round += 1;
        let round = *round;
        let mut under_replicated = 0;
        let mut followers_now = HashSet::new();
        ctx.for_each_log(|topic, partition, log| {
            let parts = match published.get_mut(topic) {
                Some(parts) => parts,
                None => published.entry(topic.to_string()).or_default(),
            };
            let (gauges, seen) = parts
                .entry(partition)
                .or_insert_with(|| (ctx.metrics.partitions.gauges(topic, partition), round));
            *seen = round;
            let o = log.offsets();
            gauges.set(PartitionOffsets {
                log_start: o.log_start.to_wire(),
                high_watermark: o.high_watermark.to_wire(),
                log_end: o.log_end.to_wire(),
                last_stable: log.last_stable_offset().to_wire(),
                bytes: o.bytes as i64,
            });
            if let Some(state) = ctx.partition_state(topic, partition) {
                let lag = ctx
                    .replication
                    .slowest_follower(topic, partition, o.log_end);
                gauges.set_replication(state.replicas.len(), state.isr.len(), lag);
                ctx.lags.report(topic, partition, lag);
                if state.leader == Some(ctx.node) {
                    under_replicated += i64::from(state.isr.len() < state.replicas.len());
                    for (follower, lag) in
                        ctx.replication.follower_lags(topic, partition, o.log_end)
                    {
                        let replication = &ctx.metrics.replication;
                        replication.set_follower_lag(topic, partition, follower, lag);
                        followers_now.insert((topic.to_string(), partition, follower));
                    }
                }
            }
        });
        let replication = &ctx.metrics.replication;
        replication.under_replicated.set(under_replicated);
        for (topic, partition, follower) in followers.difference(&followers_now) {
            replication.forget_follower(topic, *partition, *follower);
        }
        *followers = followers_now;
        published.retain(|topic, parts| {
            parts.retain(|partition, (_, seen)| {
                let open = *seen == round;
                if !open {
                    ctx.metrics.partitions.forget_partition(topic, *partition);
                    ctx.lags.report(topic, *partition, 0);
                }
                open
            });
            if parts.is_empty() {
                ctx.metrics.partitions.forget_topic(topic);
            }
            !parts.is_empty()
        });
        let mut groups_now = HashSet::new();
        for (group, _, state) in ctx.coordinator.list(Vec::new()) {
            if let Some((_, generation, members)) = ctx.coordinator.describe(&group) {
                ctx.metrics
                    .groups
                    .publish(&group, state.kafka_name(), generation, members);
                groups_now.insert(group);
            }
        }
        for group in groups.difference(&groups_now) {
            ctx.metrics.groups.forget(group);
        }
        *groups = groups_now;
        let held_kib = ctx.inflight_kib_held();
        ctx.metrics
            .connections
            .inflight_bytes
            .set((held_kib * 1024) as i64);
    }
}
