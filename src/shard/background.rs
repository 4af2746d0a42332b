//! The list of a shard's background tasks, started in one place once the shard's
//! storage is open (see `shard::tasks` for how they run and stop).

use std::{rc::Rc, time::Duration};

use super::replica_roles as roles;
use super::{
    compactor,
    context::{ShardContext, RETENTION_CHECK_INTERVAL},
    metrics_publisher, strays, txn_routing,
};

/// How often an idle shard looks for metadata changes (a deleted topic's logs go then).
const RESYNC_INTERVAL: Duration = Duration::from_millis(100);

/// How often the coordinator expires sessions, ends rebalances that timed out and drops
/// the groups this shard no longer coordinates.
const GROUP_TIMERS_INTERVAL: Duration = Duration::from_millis(100);

/// How often a shard looks for offsets journal partitions to snapshot.
const JOURNAL_SNAPSHOT_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// When shard 0 looks for partition directories nobody holds.
const STRAY_SWEEP_DELAY: Duration = Duration::from_secs(2);

/// Starts every background task of the shard `ctx`.
pub(super) fn start(ctx: &Rc<ShardContext>) {
    let tasks = &ctx.tasks;
    let weak = Rc::downgrade(ctx);
    // After a metadata change, the partitions newly placed here are opened (the shard's
    // runner opened those placed before it started).
    let mut opened_at = ctx.metadata_version();
    tasks.periodic("resync", RESYNC_INTERVAL, weak.clone(), async move |ctx| {
        ctx.resync().await;
        let version = ctx.metadata_version();
        if version != opened_at {
            ctx.open_placed_partitions().await;
            opened_at = version;
        }
    });
    tasks.periodic(
        "group timers",
        GROUP_TIMERS_INTERVAL,
        weak.clone(),
        async |ctx| {
            ctx.coordinator.expire(std::time::Instant::now());
            // Caught up first, so each group's ownership is read from the shard's own
            // snapshot rather than from a copy of the registry's view per group.
            ctx.resync().await;
            ctx.coordinator.evict(|group| ctx.owns_group(group));
        },
    );
    tasks.periodic(
        "retention",
        RETENTION_CHECK_INTERVAL,
        weak.clone(),
        async |ctx| ctx.enforce_retention().await,
    );
    tasks.periodic(
        "compaction",
        compactor::COMPACTION_CHECK_INTERVAL,
        weak.clone(),
        compactor::pass,
    );
    tasks.periodic(
        "transactions",
        txn_routing::TXN_HOUSEKEEPING_INTERVAL,
        weak.clone(),
        async |ctx| ctx.txns.housekeeping(&**ctx).await,
    );
    let mut publisher = metrics_publisher::Publisher::default();
    tasks.periodic(
        "metrics",
        metrics_publisher::PUBLISH_INTERVAL,
        weak.clone(),
        async move |ctx| publisher.publish(ctx),
    );
    if ctx.id.0 == 0 {
        tasks.after(
            "stray sweep",
            STRAY_SWEEP_DELAY,
            weak.clone(),
            async |ctx| {
                ctx.resync().await;
                strays::sweep(ctx).await;
            },
        );
    }
    if let Some(cluster) = &ctx.config.cluster {
        tasks.periodic(
            "journal snapshots",
            JOURNAL_SNAPSHOT_CHECK_INTERVAL,
            weak.clone(),
            async |ctx| ctx.snapshot_journals().await,
        );
        let mut roles = roles::Roles::new(cluster.replica_lag_time_max);
        tasks.periodic("replication roles", roles::CHECK, weak, async move |ctx| {
            roles.check(ctx).await
        });
    }
}
