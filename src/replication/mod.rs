//! Kafka's ISR replication, per shard. For every partition it holds a replica of, a
//! shard either leads — it tracks its followers ([`progress`]), caps the high watermark
//! at the least durable end over the ISR, and proposes ISR changes to the controller —
//! or follows — a [`fetcher`] per leader shard fetches all the partitions it follows
//! there ([`sessions`]) from that shard's own port, and does what [`follower_rules`]
//! decide of each answer. Which one is the controller's
//! decision, read from each metadata snapshot by the shard (`shard/replica_roles.rs`).
//! This module holds a shard's roles; the shard's roles check and [`fetcher`] act on
//! them, the fetcher through narrow traits the shard implements.

pub mod fetcher;
pub mod follower_rules;
pub mod lag_report;
pub mod progress;
pub mod sessions;
pub mod throttle;

use std::{
    cell::RefCell,
    collections::{HashMap, HashSet},
    rc::Rc,
    time::Instant,
};

use crate::{
    group::journal::JournalGate,
    metadata::placement::NodeId,
    storage::{partition_log::EpochEnd, Offset, PartitionLog},
};

use progress::Progress;
use sessions::FetchSession;

/// A partition: its topic's name and its index.
pub type PartitionKey = (String, u32);

/// One shard's replication roles.
#[derive(Default)]
pub struct Replication {
    led: RefCell<HashMap<PartitionKey, Progress>>,
    /// The fetch session with each leader node this shard follows partitions of (what
    /// it follows, from whom, at which epoch).
    sessions: RefCell<HashMap<NodeId, Rc<FetchSession>>>,
    proposing: RefCell<HashSet<PartitionKey>>,
    /// Offsets journal partitions this shard leads whose commits are applied to LMDB,
    /// each with the gate its changes pass.
    journals_ready: RefCell<HashMap<u32, Rc<JournalGate>>>,
    /// What this shard may still send to throttled followers.
    throttle: throttle::LeaderThrottle,
}

/// What a leader makes of a replica's fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchCheck {
    /// Go on and read.
    Read,
    /// The follower's log diverged: it must cut at this epoch's end first.
    Diverging(EpochEnd),
}

impl Replication {
    /// True when this shard leads offsets journal partition `p` and has applied its
    /// commits: it may coordinate the partition's groups.
    pub fn journal_ready(&self, p: u32) -> bool {
        self.journals_ready.borrow().contains_key(&p)
    }

    /// The gate of offsets journal partition `p` when this shard leads it and has
    /// applied its commits.
    pub fn journal_gate(&self, p: u32) -> Option<Rc<JournalGate>> {
        self.journals_ready.borrow().get(&p).cloned()
    }

    /// Every offsets journal partition this shard leads and has applied, with its gate.
    pub fn ready_journals(&self) -> Vec<(u32, Rc<JournalGate>)> {
        self.journals_ready
            .borrow()
            .iter()
            .map(|(p, gate)| (*p, Rc::clone(gate)))
            .collect()
    }

    /// How many offsets behind `log_end` the slowest follower of a partition this shard
    /// leads is (0 when it does not lead it, or leads it alone).
    pub fn slowest_follower(&self, topic: &str, partition: u32, log_end: Offset) -> u64 {
        self.led
            .borrow()
            .get(&(topic.to_string(), partition))
            .and_then(|pr| pr.lag(log_end).map(|(_, lag)| lag).max())
            .unwrap_or(0)
    }

    /// How many offsets behind `log_end` each follower of a partition this shard leads
    /// is (none when it does not lead it).
    pub fn follower_lags(
        &self,
        topic: &str,
        partition: u32,
        log_end: Offset,
    ) -> Vec<(NodeId, u64)> {
        self.led
            .borrow()
            .get(&(topic.to_string(), partition))
            .map(|pr| pr.lag(log_end).collect())
            .unwrap_or_default()
    }

    /// Stops following `key` from any leader but `keep`; a session left without
    /// partitions ends.
    pub fn stop_following(&self, key: &PartitionKey, keep: Option<NodeId>) {
        self.sessions.borrow_mut().retain(|leader, s| {
            let emptied = Some(*leader) != keep && s.remove(key);
            if emptied {
                s.stop();
            }
            !emptied
        });
    }

    /// Every partition this shard follows.
    pub fn followed(&self) -> Vec<PartitionKey> {
        self.sessions
            .borrow()
            .values()
            .flat_map(|s| s.keys())
            .collect()
    }

    /// Leads `key` with `progress` (its followers' progress from now on).
    pub fn lead(&self, key: PartitionKey, progress: Progress) {
        self.led.borrow_mut().insert(key, progress);
    }

    /// Runs `f` on the progress of `key` when this shard leads it.
    pub fn leading<R>(&self, key: &PartitionKey, f: impl FnOnce(&mut Progress) -> R) -> Option<R> {
        self.led.borrow_mut().get_mut(key).map(f)
    }

    /// Forgets leading `key` (and its journal being applied, for a journal partition);
    /// true when it led it.
    pub fn step_down(&self, key: &PartitionKey, journal: bool) -> bool {
        if journal {
            self.journals_ready.borrow_mut().remove(&key.1);
        }
        self.led.borrow_mut().remove(key).is_some()
    }

    /// Every partition this shard leads.
    pub fn led(&self) -> Vec<PartitionKey> {
        self.led.borrow().keys().cloned().collect()
    }

    /// Records that offsets journal partition `p`, which this shard leads, has its
    /// commits applied.
    pub fn journal_taken_up(&self, p: u32) {
        self.journals_ready.borrow_mut().entry(p).or_default();
    }

    /// The session with `leader`, started (its fetcher spawned by `start`) if there is
    /// none.
    pub fn session_with(
        &self,
        leader: NodeId,
        start: impl FnOnce(&Rc<FetchSession>),
    ) -> Rc<FetchSession> {
        let mut sessions = self.sessions.borrow_mut();
        let session = sessions.entry(leader).or_insert_with(|| {
            let session = Rc::new(FetchSession::new(leader));
            start(&session);
            session
        });
        Rc::clone(session)
    }

    /// True when `key` is followed from `leader` at `epoch` already.
    pub fn follows(&self, key: &PartitionKey, leader: NodeId, epoch: i32) -> bool {
        self.sessions
            .borrow()
            .get(&leader)
            .is_some_and(|s| s.current(key, epoch))
    }

    /// The ISR changes the led partitions' progress calls for, each partition's
    /// proposal begun (no second one until [`end_proposal`](Self::end_proposal)):
    /// (partition, epoch, ISR now, proposed ISR). `high_watermark` gives each
    /// partition's, `None` for one not open.
    pub fn begin_proposals(
        &self,
        now: Instant,
        lag_max: std::time::Duration,
        high_watermark: impl Fn(&PartitionKey) -> Option<Offset>,
    ) -> Vec<(PartitionKey, i32, Vec<NodeId>, Vec<NodeId>)> {
        let mut due = Vec::new();
        let mut proposing = self.proposing.borrow_mut();
        for (key, pr) in self.led.borrow_mut().iter_mut() {
            if proposing.contains(key) {
                continue;
            }
            let Some(hw) = high_watermark(key) else {
                continue;
            };
            if let Some(change) = pr.isr_change(hw, lag_max, now) {
                pr.proposing(&change.joining);
                proposing.insert(key.clone());
                due.push((key.clone(), pr.epoch, pr.isr().to_vec(), change.isr));
            }
        }
        due
    }

    /// Ends `key`'s proposal; a refused one gives up the followers it would have let
    /// join (they may be proposed again).
    pub fn end_proposal(&self, key: &PartitionKey, refused: bool) {
        self.proposing.borrow_mut().remove(key);
        if refused {
            if let Some(pr) = self.led.borrow_mut().get_mut(key) {
                pr.abandon_joining();
            }
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
        if let Some(end) = divergence(log, offset, last_epoch) {
            return FetchCheck::Diverging(end);
        }
        if let Some(pr) = self.led.borrow_mut().get_mut(key) {
            if pr.fetched(node, offset, log.log_end(), Instant::now()) {
                apply_cap(log, pr);
            }
        }
        FetchCheck::Read
    }
}

/// The leader's rule for a replica fetching at `offset` whose last fetched epoch is
/// `last_epoch` (-1: none): where its log parted from the leader's `log`, if it did —
/// the end of the last epoch both have, which the follower cuts back to.
pub fn divergence(log: &PartitionLog, offset: Offset, last_epoch: i32) -> Option<EpochEnd> {
    if last_epoch < 0 {
        return None;
    }
    match log.epoch_end(last_epoch) {
        Some(e) if e.epoch == last_epoch && e.end_offset >= offset => None,
        Some(e) => Some(e),
        // The follower has an epoch newer than any here (it led and appended what
        // nobody else got): it keeps at most what precedes that epoch, up to where this
        // log's newest epoch ends.
        None => Some(match log.leader_epochs().latest() {
            Some(latest) => EpochEnd {
                epoch: latest,
                end_offset: log.log_end(),
            },
            None => EpochEnd {
                epoch: -1,
                end_offset: log.log_start_offset(),
            },
        }),
    }
}

/// Caps `log`'s high watermark at what `pr` says the ISR holds.
pub fn apply_cap(log: &PartitionLog, pr: &Progress) {
    log.set_commit_cap(pr.commit_cap().unwrap_or(Offset(u64::MAX)));
}
