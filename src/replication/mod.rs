//! Kafka's ISR replication, per shard. For every partition it holds a replica of, a
//! shard either leads — it tracks its followers ([`progress`]), caps the high watermark
//! at the least durable end over the ISR, and proposes ISR changes to the controller —
//! or follows — it runs a [`fetcher`] against its leader shard's own port. Which one is
//! the controller's decision, read from each metadata snapshot ([`Replication::reconcile`]).

pub mod fetcher;
pub mod progress;

use std::{
    cell::{Cell, RefCell},
    collections::{HashMap, HashSet},
    rc::Rc,
    time::{Duration, Instant},
};

use crate::{
    metadata::placement::NodeId,
    shard::context::ShardContext,
    storage::{partition_log::EpochEnd, Offset, PartitionLog},
};

use fetcher::Assignment;
use progress::Progress;

type PartitionKey = (String, u32);

/// How often leaders look for ISR changes to propose.
const ISR_CHECK: Duration = Duration::from_millis(250);

/// A partition this shard follows: whom, at which epoch, and the switch that stops its
/// fetcher.
struct Following {
    leader: NodeId,
    epoch: i32,
    stop: Rc<Cell<bool>>,
}

/// One shard's replication roles.
#[derive(Default)]
pub struct Replication {
    led: RefCell<HashMap<PartitionKey, Progress>>,
    followed: RefCell<HashMap<PartitionKey, Following>>,
    proposing: RefCell<HashSet<PartitionKey>>,
}

/// Why a replica's fetch is refused (the Kafka error it gets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchCheck {
    /// Go on and read.
    Read,
    /// The follower's log diverged: it must cut at this epoch's end first.
    Diverging(EpochEnd),
}

impl Replication {
    /// Takes up the roles the shard's current metadata gives it: leads (tracking its
    /// followers from the high watermark) or follows (a fetcher per partition), and
    /// steps down from partitions it no longer leads.
    pub async fn reconcile(ctx: &Rc<ShardContext>) {
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
                    r.stop_following(&key);
                    if state.replicas.len() == 1 {
                        continue;
                    }
                    let current = r
                        .led
                        .borrow()
                        .get(&key)
                        .is_some_and(|pr| pr.epoch == state.leader_epoch);
                    let Ok(log) = ctx.replica(&t.name, p as u32).await else {
                        continue;
                    };
                    if current {
                        if let Some(pr) = r.led.borrow_mut().get_mut(&key) {
                            pr.set_isr(&state.isr);
                            apply_cap(&log, pr);
                        }
                    } else {
                        tracing::info!(topic = %t.name, partition = p, epoch = state.leader_epoch, isr = ?state.isr, "leading");
                        let pr = Progress::new(
                            state.leader_epoch,
                            ctx.node,
                            &state.replicas,
                            &state.isr,
                            log.high_watermark(),
                            Instant::now(),
                        );
                        apply_cap(&log, &pr);
                        r.led.borrow_mut().insert(key, pr);
                    }
                } else {
                    r.step_down(ctx, &key);
                    match state.leader {
                        Some(leader) => r.follow(ctx, key, leader, state.leader_epoch),
                        None => r.stop_following(&key),
                    }
                }
            }
        }
        let r = &ctx.replication;
        let gone: Vec<PartitionKey> = r
            .led
            .borrow()
            .keys()
            .chain(r.followed.borrow().keys())
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            r.step_down(ctx, &key);
            r.stop_following(&key);
        }
    }

    fn step_down(&self, ctx: &ShardContext, key: &PartitionKey) {
        if self.led.borrow_mut().remove(key).is_some() {
            tracing::info!(topic = %key.0, partition = key.1, "no longer leading");
            if let Some(log) = ctx.open_log_of(&key.0, key.1) {
                log.step_down();
            }
        }
    }

    fn follow(&self, ctx: &Rc<ShardContext>, key: PartitionKey, leader: NodeId, epoch: i32) {
        if self
            .followed
            .borrow()
            .get(&key)
            .is_some_and(|f| f.leader == leader && f.epoch == epoch)
        {
            return;
        }
        self.stop_following(&key);
        let stop = Rc::new(Cell::new(false));
        let assignment = Assignment {
            topic: key.0.clone(),
            partition: key.1,
            leader,
            epoch,
        };
        glommio::spawn_local(fetcher::follow(
            Rc::clone(ctx),
            assignment,
            Rc::clone(&stop),
        ))
        .detach();
        self.followed.borrow_mut().insert(
            key,
            Following {
                leader,
                epoch,
                stop,
            },
        );
    }

    fn stop_following(&self, key: &PartitionKey) {
        if let Some(f) = self.followed.borrow_mut().remove(key) {
            f.stop.set(true);
        }
    }

    /// A fetch from replica `node` at `offset` whose last fetched epoch is
    /// `last_epoch`: records its progress (moving the high watermark) unless its log
    /// diverged from `log`, in which case it is told where to cut.
    pub fn replica_fetched(
        &self,
        key: &PartitionKey,
        log: &PartitionLog,
        node: NodeId,
        offset: Offset,
        last_epoch: i32,
    ) -> FetchCheck {
        if last_epoch >= 0 {
            let end = log.epoch_end(last_epoch);
            let diverged = match end {
                Some(e) => e.epoch != last_epoch || e.end_offset < offset,
                None => true,
            };
            if diverged {
                return FetchCheck::Diverging(end.unwrap_or(EpochEnd {
                    epoch: -1,
                    end_offset: log.log_start_offset(),
                }));
            }
        }
        if let Some(pr) = self.led.borrow_mut().get_mut(key) {
            if pr.fetched(node, offset, log.log_end(), Instant::now()) {
                apply_cap(log, pr);
            }
        }
        FetchCheck::Read
    }

    /// Every [`ISR_CHECK`], each led partition's leader proposes the ISR change its
    /// followers' progress calls for (one proposal at a time per partition); stops when
    /// the shard is gone.
    pub async fn maintain_isr(weak: std::rc::Weak<ShardContext>, lag_max: Duration) {
        loop {
            glommio::timer::sleep(ISR_CHECK).await;
            let Some(ctx) = weak.upgrade() else {
                return;
            };
            let r = &ctx.replication;
            let now = Instant::now();
            let mut due = Vec::new();
            for (key, pr) in r.led.borrow_mut().iter_mut() {
                if r.proposing.borrow().contains(key) {
                    continue;
                }
                let Some(log) = ctx.open_log_of(&key.0, key.1) else {
                    continue;
                };
                if let Some(change) = pr.isr_change(log.high_watermark(), lag_max, now) {
                    pr.proposing(&change.joining);
                    due.push((key.clone(), pr.epoch, pr.isr().to_vec(), change.isr));
                }
            }
            for (key, epoch, before, isr) in due {
                r.proposing.borrow_mut().insert(key.clone());
                let weak = std::rc::Rc::downgrade(&ctx);
                glommio::spawn_local(async move {
                    let Some(ctx) = weak.upgrade() else {
                        return;
                    };
                    tracing::info!(topic = %key.0, partition = key.1, epoch, from = ?before, to = ?isr, "proposing an ISR change");
                    let result = ctx.registry.alter_isr(&key.0, key.1, epoch, isr).await;
                    let r = &ctx.replication;
                    r.proposing.borrow_mut().remove(&key);
                    if let Err(e) = result {
                        tracing::warn!(topic = %key.0, partition = key.1, error = %e, "ISR change refused");
                        if let Some(pr) = r.led.borrow_mut().get_mut(&key) {
                            pr.abandon_joining();
                        }
                    }
                    // The committed ISR reaches the progress at the shard's next
                    // reconcile, when the metadata that holds it is installed.
                })
                .detach();
            }
        }
    }
}

/// Caps `log`'s high watermark at what `pr` says the ISR holds.
fn apply_cap(log: &PartitionLog, pr: &Progress) {
    log.set_commit_cap(pr.commit_cap().unwrap_or(Offset(u64::MAX)));
}
