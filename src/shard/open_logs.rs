//! The table of a shard's open partition logs, and the lock that serializes changes to
//! partition directories (opening, cutting, deleting), so a log is never opened in a
//! directory whose old files are still being deleted.

use std::{
    cell::RefCell,
    collections::HashMap,
    time::{Duration, Instant},
};

use crate::semaphore::{Permit, Semaphore};

use crate::storage::PartitionLog;

/// A partition: its topic's name and its index.
pub type PartitionKey = (String, u32);

/// Shortest time between two attempts to reopen a fenced partition.
const REOPEN_INTERVAL: Duration = Duration::from_secs(1);

/// Topic name → partition → (topic id, log). Looked up by `&str`, so the data path
/// allocates no key.
type Table = HashMap<String, HashMap<u32, ([u8; 16], PartitionLog)>>;

/// A shard's open logs.
pub struct OpenLogs {
    logs: RefCell<Table>,
    reopen_attempts: RefCell<HashMap<PartitionKey, Instant>>,
    /// Held while a partition directory changes.
    dirs: Semaphore,
}

impl Default for OpenLogs {
    fn default() -> OpenLogs {
        OpenLogs {
            logs: RefCell::default(),
            reopen_attempts: RefCell::default(),
            dirs: Semaphore::new(1),
        }
    }
}

impl OpenLogs {
    /// Waits until no other directory change runs; `None` when the shard is going away.
    pub(super) async fn changing_dirs(&self) -> Option<Permit<'_>> {
        self.dirs.acquire_permit(1).await.ok()
    }

    /// The log of partition `p` of `topic`, if open.
    pub fn get(&self, topic: &str, p: u32) -> Option<PartitionLog> {
        self.logs
            .borrow()
            .get(topic)
            .and_then(|parts| parts.get(&p))
            .map(|(_, log)| log.clone())
    }

    /// Calls `f` with every open log, its topic and partition, without copying the
    /// table (`f` must not open or close logs).
    pub fn for_each(&self, mut f: impl FnMut(&str, u32, &PartitionLog)) {
        for (topic, parts) in self.logs.borrow().iter() {
            for (p, (_, log)) in parts {
                f(topic, *p, log);
            }
        }
    }

    /// Every open log with its topic and partition.
    pub fn all(&self) -> Vec<(PartitionKey, PartitionLog)> {
        self.logs
            .borrow()
            .iter()
            .flat_map(|(topic, parts)| {
                parts
                    .iter()
                    .map(move |(p, (_, log))| ((topic.clone(), *p), log.clone()))
            })
            .collect()
    }

    /// Records `log` as partition `p` of `topic` (whose id is `topic_id`).
    pub(super) fn insert(&self, topic: &str, p: u32, topic_id: [u8; 16], log: PartitionLog) {
        self.logs
            .borrow_mut()
            .entry(topic.to_string())
            .or_default()
            .insert(p, (topic_id, log));
    }

    /// Takes partition `p` of `topic` out of the table.
    pub(super) fn remove(&self, topic: &str, p: u32) -> Option<PartitionLog> {
        self.logs
            .borrow_mut()
            .get_mut(topic)
            .and_then(|parts| parts.remove(&p))
            .map(|(_, log)| log)
    }

    /// Takes every log out of the table.
    pub(super) fn take_all(&self) -> Vec<(PartitionKey, PartitionLog)> {
        let all = self.all();
        self.logs.borrow_mut().clear();
        all
    }

    /// Keeps the logs `keep(topic, partition, topic id)` approves and takes out (and
    /// returns) the others.
    pub(super) fn retain(
        &self,
        mut keep: impl FnMut(&str, u32, [u8; 16]) -> bool,
    ) -> Vec<(PartitionKey, PartitionLog)> {
        let mut gone = Vec::new();
        self.logs.borrow_mut().retain(|name, parts| {
            parts.retain(|p, (id, log)| {
                let kept = keep(name, *p, *id);
                if !kept {
                    gone.push(((name.clone(), *p), log.clone()));
                }
                kept
            });
            !parts.is_empty()
        });
        gone
    }

    /// True when a fenced partition may be reopened now (at most once per
    /// [`REOPEN_INTERVAL`], so a failing disk is not hammered); records the attempt.
    pub(super) fn reopen_due(&self, topic: &str, p: u32, now: Instant) -> bool {
        let key = (topic.to_string(), p);
        let due = self
            .reopen_attempts
            .borrow()
            .get(&key)
            .is_none_or(|t| now >= *t + REOPEN_INTERVAL);
        if due {
            self.reopen_attempts.borrow_mut().insert(key, now);
        }
        due
    }
}
