//! Kafka's ISR replication, per shard. For every partition it holds a replica of, a
//! shard either leads — it tracks its followers ([`progress`]), caps the high watermark
//! at the least durable end over the ISR, and proposes ISR changes to the controller —
//! or follows — a [`fetcher`] per leader shard fetches all the partitions it follows
//! there ([`sessions`]) from that shard's own port. Which one is the controller's
//! decision, read from each metadata snapshot ([`roles`]). This module holds a shard's
//! roles; [`roles`] and [`fetcher`] act on them.

pub mod fetcher;
pub mod lag_report;
pub mod progress;
pub mod roles;
pub mod sessions;

use std::{
    cell::RefCell,
    collections::{HashMap, HashSet},
    rc::Rc,
    time::Instant,
};

use crate::{
    metadata::placement::NodeId,
    storage::{partition_log::EpochEnd, Offset, PartitionLog},
};

use progress::Progress;
use sessions::FetchSession;

type PartitionKey = (String, u32);

/// One shard's replication roles.
#[derive(Default)]
pub struct Replication {
    led: RefCell<HashMap<PartitionKey, Progress>>,
    /// The fetch session with each leader node this shard follows partitions of (what
    /// it follows, from whom, at which epoch).
    sessions: RefCell<HashMap<NodeId, Rc<FetchSession>>>,
    proposing: RefCell<HashSet<PartitionKey>>,
    /// Offsets journal partitions this shard leads whose commits are applied to LMDB.
    journals_ready: RefCell<HashSet<u32>>,
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
        self.journals_ready.borrow().contains(&p)
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

    /// Stops following `key` from any leader but `keep`; a session left without
    /// partitions ends.
    fn stop_following(&self, key: &PartitionKey, keep: Option<NodeId>) {
        self.sessions.borrow_mut().retain(|leader, s| {
            let emptied = Some(*leader) != keep && s.remove(key);
            if emptied {
                s.stop();
            }
            !emptied
        });
    }

    /// Every partition this shard follows.
    fn followed(&self) -> Vec<PartitionKey> {
        self.sessions
            .borrow()
            .values()
            .flat_map(|s| s.keys())
            .collect()
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
            let diverging = match log.epoch_end(last_epoch) {
                Some(e) if e.epoch == last_epoch && e.end_offset >= offset => None,
                Some(e) => Some(e),
                // The follower has an epoch newer than any here (it led and appended
                // what nobody else got): it keeps at most what precedes that epoch,
                // up to where this log's newest epoch ends.
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
            };
            if let Some(end) = diverging {
                return FetchCheck::Diverging(end);
            }
        }
        if let Some(pr) = self.led.borrow_mut().get_mut(key) {
            if pr.fetched(node, offset, log.log_end(), Instant::now()) {
                apply_cap(log, pr);
            }
        }
        FetchCheck::Read
    }
}

/// Caps `log`'s high watermark at what `pr` says the ISR holds.
fn apply_cap(log: &PartitionLog, pr: &Progress) {
    log.set_commit_cap(pr.commit_cap().unwrap_or(Offset(u64::MAX)));
}
