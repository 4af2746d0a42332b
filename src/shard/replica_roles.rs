//! A shard taking up the replication roles its metadata gives it: leading (tracking
//! followers, proposing ISR changes) or following (a fetcher per partition), and
//! stepping down. Runs on the shard, checked by [`Roles::check`]. The fetcher reaches
//! the shard only through the two narrow traits this file implements for it
//! ([`ReplicaLogs`], [`LeaderAddresses`]).

use std::{
    collections::HashSet,
    rc::Rc,
    time::{Duration, Instant},
};

use weir_client::dialer::Dialer;

use super::context::ShardContext;
use crate::metadata::partition_error::PartitionError;
use crate::{
    group::journal,
    metadata::{cluster_state::OFFSETS_TOPIC, placement::NodeId},
    replication::{
        apply_cap,
        fetcher::{self, LeaderAddresses, ReplicaLogs},
        progress::Progress,
        PartitionKey,
    },
    storage::{partition_log::Truncation, Offset, PartitionLog},
};

/// How often leaders look for ISR changes to propose, and shards for new metadata.
pub const CHECK: Duration = Duration::from_millis(100);

/// ISR checks happen every this many [`CHECK`]s.
const ISR_CHECKS_EVERY: u32 = 3;

/// A shard's replication roles as of its last check.
pub struct Roles {
    /// How long a follower may stay behind before its leader proposes it leave the ISR.
    lag_max: Duration,
    /// The metadata version the roles were last reconciled with.
    reconciled: Option<u64>,
    ticks: u32,
}

impl Roles {
    /// Roles not yet reconciled with any metadata.
    pub fn new(lag_max: Duration) -> Roles {
        Roles {
            lag_max,
            reconciled: None,
            ticks: 0,
        }
    }

    /// One check, run every [`CHECK`] by the shard's tasks: reconciles the roles with a
    /// new metadata version and, every [`ISR_CHECKS_EVERY`] checks, has the shard's
    /// leaders propose ISR changes (followers not caught up for `lag_max` leave,
    /// caught-up ones join) and take up the journals they lead.
    pub async fn check(&mut self, ctx: &Rc<ShardContext>) {
        ctx.resync().await;
        let version = ctx.metadata_version();
        if self.reconciled != Some(version) {
            self.reconciled = Some(version);
            reconcile(ctx).await;
        }
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks % ISR_CHECKS_EVERY == 0 {
            propose_isr_changes(ctx, self.lag_max);
            take_up_journals(ctx).await;
        }
    }
}

/// Takes up the roles the shard's current metadata gives it: leads (tracking its
/// followers from the high watermark) or follows (a fetcher per partition), and
/// steps down from partitions it no longer leads.
async fn reconcile(ctx: &Rc<ShardContext>) {
    let snapshot = ctx.metadata();
    let mut seen = HashSet::new();
    for t in snapshot.topics.values() {
        for (p, state) in t.states.iter().enumerate() {
            if !state.replicas.contains(&ctx.node) {
                continue;
            }
            let key = (t.name.clone(), p as u32);
            seen.insert(key.clone());
            let r = &ctx.replication;
            if state.leader == Some(ctx.node) {
                r.stop_following(&key, None);
                if t.name == OFFSETS_TOPIC {
                    take_up_journal(ctx, p as u32).await;
                }
                if state.replicas.len() == 1 {
                    // Alone (one replica, or the one a move left here): nothing but its
                    // own durability holds the high watermark back.
                    r.step_down(&key, false);
                    if let Some(log) = ctx.open_log_of(&t.name, p as u32) {
                        log.set_commit_cap(Offset(u64::MAX));
                    }
                    continue;
                }
                let current = r
                    .leading(&key, |pr| pr.epoch == state.leader_epoch)
                    .unwrap_or(false);
                let Ok(log) = ctx.replica(&t.name, p as u32).await else {
                    continue;
                };
                if current {
                    r.leading(&key, |pr| {
                        pr.set_replicas(&state.replicas, Instant::now());
                        pr.set_isr(&state.isr);
                        apply_cap(&log, pr);
                    });
                } else {
                    tracing::info!(topic = %t.name, partition = p, epoch = state.leader_epoch, isr = ?state.isr, "leading");
                    let pr = Progress::new(
                        state.leader_epoch,
                        ctx.node,
                        &state.replicas,
                        &state.isr,
                        (log.high_watermark(), log.log_end()),
                        Instant::now(),
                    );
                    apply_cap(&log, &pr);
                    r.lead(key, pr);
                }
            } else {
                step_down(ctx, &key);
                match state.leader {
                    Some(leader) => follow(ctx, key, leader, state.leader_epoch),
                    None => r.stop_following(&key, None),
                }
            }
        }
    }
    let r = &ctx.replication;
    let mut gone: Vec<PartitionKey> = r.led();
    gone.extend(r.followed());
    gone.retain(|k| !seen.contains(k));
    for key in gone {
        step_down(ctx, &key);
        r.stop_following(&key, None);
    }
}

/// Takes up every offsets journal partition this shard leads that is not ready yet
/// (one whose replay failed is tried again here).
async fn take_up_journals(ctx: &ShardContext) {
    let snapshot = ctx.metadata();
    let Some(journal) = snapshot.topics.get(OFFSETS_TOPIC) else {
        return;
    };
    for (p, state) in journal.states.iter().enumerate() {
        if state.leader == Some(ctx.node) {
            take_up_journal(ctx, p as u32).await;
        }
    }
}

/// Before coordinating the groups of offsets journal partition `p`, which it now
/// leads, the shard applies every commit its copy holds (it may have stored some it
/// never applied).
async fn take_up_journal(ctx: &ShardContext, p: u32) {
    if ctx.replication.journal_ready(p) {
        return;
    }
    let log = match ctx.replica(OFFSETS_TOPIC, p).await {
        Ok(log) => log,
        Err(e) => {
            tracing::warn!(partition = p, error = ?e, "offsets journal partition not open yet");
            return;
        }
    };
    let Some(names) = ctx.journal_names(p) else {
        return;
    };
    match journal::replay(&log, ctx.coordinator.store(), names).await {
        Ok(n) => {
            tracing::info!(
                partition = p,
                commits = n,
                "coordinating the groups of an offsets journal partition"
            );
            ctx.replication.journal_taken_up(p);
        }
        Err(e) => {
            tracing::error!(partition = p, error = %e, "cannot replay an offsets journal partition");
        }
    }
}

fn step_down(ctx: &ShardContext, key: &PartitionKey) {
    if ctx.replication.step_down(key, key.0 == OFFSETS_TOPIC) {
        tracing::info!(topic = %key.0, partition = key.1, "no longer leading");
        if let Some(log) = ctx.open_log_of(&key.0, key.1) {
            log.step_down();
        }
    }
}

fn follow(ctx: &Rc<ShardContext>, key: PartitionKey, leader: NodeId, epoch: i32) {
    let r = &ctx.replication;
    if r.follows(&key, leader, epoch) {
        return;
    }
    r.stop_following(&key, Some(leader));
    let session = r.session_with(leader, |session| {
        glommio::spawn_local(fetcher::run(Rc::clone(ctx), Rc::clone(session))).detach();
    });
    tracing::info!(topic = %key.0, partition = key.1, leader, epoch, "following");
    session.add(key, epoch);
}

/// Each led partition's leader proposes the ISR change its followers' progress calls
/// for, one proposal at a time per partition. The committed ISR reaches the progress at
/// the next reconcile, once the metadata holding it is installed.
fn propose_isr_changes(ctx: &Rc<ShardContext>, lag_max: Duration) {
    let due = ctx
        .replication
        .begin_proposals(Instant::now(), lag_max, |key| {
            ctx.open_log_of(&key.0, key.1)
                .map(|log| log.high_watermark())
        });
    for (key, epoch, before, isr) in due {
        let weak = Rc::downgrade(ctx);
        glommio::spawn_local(async move {
            let Some(ctx) = weak.upgrade() else {
                return;
            };
            tracing::info!(topic = %key.0, partition = key.1, epoch, from = ?before, to = ?isr, "proposing an ISR change");
            let shrink = isr.len() < before.len();
            let result = ctx.registry.alter_isr(&key.0, key.1, epoch, isr).await;
            match &result {
                Err(e) => {
                    tracing::warn!(topic = %key.0, partition = key.1, error = %e, "ISR change refused");
                }
                Ok(_) if shrink => {
                    ctx.metrics.replication.isr_shrinks.inc();
                }
                Ok(_) => {
                    ctx.metrics.replication.isr_expands.inc();
                }
            }
            ctx.replication.end_proposal(&key, result.is_err());
        })
        .detach();
    }
}

impl ReplicaLogs for ShardContext {
    fn node(&self) -> NodeId {
        self.node
    }

    async fn replica(&self, topic: &str, p: u32) -> Result<PartitionLog, PartitionError> {
        ShardContext::replica(self, topic, p).await
    }

    async fn cut(
        &self,
        topic: &str,
        p: u32,
        how: Truncation,
    ) -> Result<PartitionLog, PartitionError> {
        self.cut_replica(topic, p, how).await
    }
}

impl LeaderAddresses for ShardContext {
    fn leader_addr(&self, node: NodeId) -> Option<String> {
        self.node_addr(node)
    }

    fn dialer(&self) -> Dialer {
        self.peer_dialer()
    }
}
