//! Committed consumer-group offsets in LMDB (heed), fenced by generation.
//!
//! One LMDB environment per broker, keyed by `(group, topic, partition)`. A commit
//! follows the rule of the original design, as one conditional update:
//!
//! ```sql
//! UPDATE group_offsets SET committed = :offset, generation = :gen, updated_at = now()
//! WHERE group_id = :group AND topic = :topic AND partition = :partition
//!   AND generation <= :gen      -- a member of an older generation cannot clobber progress
//!   AND committed < :offset;    -- offsets only move forward
//! ```
//!
//! A commit that matches no row changes nothing and is not an error (clients re-commit
//! the same position on close). The only way an offset moves backwards is a
//! [`Fence::Reset`], which the coordinator allows only while the group has no members
//! (generation -1 commits from simple consumers and offset-reset tools).
//!
//! Durability contract: [`OffsetStore::commit`] writes with `MDB_NOSYNC`, so a commit is
//! in the OS page cache when it returns; it is durable after the next
//! [`OffsetStore::sync`] (an fsync, blocking: run it on the blocking pool, as the shard's
//! group commit does before answering OffsetCommit).
//!
//! Values are a small versioned binary layout (version byte, offset, leader epoch,
//! generation, commit time, metadata) rather than an rkyv archive: 29 fixed bytes plus
//! the metadata string, decoded with bounds checks, with no alignment requirement on
//! LMDB's unaligned value pointers.

use std::path::{Path, PathBuf};

use heed::{types::Bytes, Database, Env, EnvFlags, EnvOpenOptions};

use crate::metrics::{CommittedOffsets, CommittedRow};

/// LMDB's key size limit (`mdb_env_get_maxkeysize` with default build options).
pub const KEY_BYTES_MAX: usize = 511;

const VALUE_VERSION: u8 = 1;
const VALUE_FIXED_BYTES: usize = 1 + 8 + 4 + 4 + 8 + 4;

/// Errors of the offset store.
#[derive(Debug, thiserror::Error)]
pub enum OffsetStoreError {
    /// LMDB failed.
    #[error("offset store {path}: {source}")]
    Lmdb {
        /// The environment directory.
        path: PathBuf,
        /// heed's error.
        #[source]
        source: heed::Error,
    },
    /// The group and topic names do not fit an LMDB key.
    #[error("group {group:?} with topic {topic:?} makes a key longer than {KEY_BYTES_MAX} bytes")]
    KeyTooLong {
        /// The group id.
        group: String,
        /// The topic.
        topic: String,
    },
    /// A stored value does not decode.
    #[error("corrupt committed offset for group {group:?}: {reason}")]
    Corrupt {
        /// The group id.
        group: String,
        /// What is wrong.
        reason: String,
    },
}

/// The store's result type.
pub type Result<T, E = OffsetStoreError> = std::result::Result<T, E>;

/// A committed position.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommittedOffset {
    /// The next offset the group will consume.
    pub offset: i64,
    /// The leader epoch the client saw, or -1.
    pub leader_epoch: i32,
    /// The generation that committed it, or -1 for a reset.
    pub generation: i32,
    /// When it was committed, ms since the epoch.
    pub committed_at_ms: i64,
    /// The client's metadata string.
    pub metadata: String,
}

/// How a commit is fenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Fence {
    /// A member of this generation commits: the stored offset changes only if it was
    /// committed by this or an older generation and the new offset is larger.
    Generation(i32),
    /// The group has no members: the offset is set, forwards or backwards.
    Reset,
}

/// What a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// The offset was stored.
    Applied,
    /// The fencing rule matched nothing; the stored offset stays (not an error).
    Unchanged,
}

/// The committed-offset store. `Send + Sync`: one per broker, shared by the shards.
pub struct OffsetStore {
    path: PathBuf,
    env: Env,
    db: Database<Bytes, Bytes>,
    /// Offsets committed inside transactions, not yet ended (`pending`).
    pending: Database<Bytes, Bytes>,
    /// The transaction coordinators' state (`transactions`).
    transactions: Database<Bytes, Bytes>,
}

mod pending;
mod slots;
mod transactions;

pub use pending::{PendingOffsets, PendingTxn};
pub use slots::SlotState;

fn group_prefix(group: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + group.len());
    k.extend_from_slice(&(group.len() as u16).to_be_bytes());
    k.extend_from_slice(group.as_bytes());
    k
}

fn key(group: &str, topic: &str, partition: u32) -> Result<Vec<u8>> {
    let len = 2 + group.len() + 2 + topic.len() + 4;
    if len > KEY_BYTES_MAX || group.len() > u16::MAX as usize || topic.len() > u16::MAX as usize {
        return Err(OffsetStoreError::KeyTooLong {
            group: group.to_string(),
            topic: topic.to_string(),
        });
    }
    let mut k = group_prefix(group);
    k.extend_from_slice(&(topic.len() as u16).to_be_bytes());
    k.extend_from_slice(topic.as_bytes());
    k.extend_from_slice(&partition.to_be_bytes());
    Ok(k)
}

fn split_key(group: &str, k: &[u8]) -> Option<(String, u32)> {
    let rest = k.get(2 + group.len()..)?;
    let topic_len = u16::from_be_bytes([*rest.first()?, *rest.get(1)?]) as usize;
    let topic = std::str::from_utf8(rest.get(2..2 + topic_len)?).ok()?;
    let p = rest.get(2 + topic_len..2 + topic_len + 4)?;
    Some((
        topic.to_string(),
        u32::from_be_bytes([p[0], p[1], p[2], p[3]]),
    ))
}

fn encode(v: &CommittedOffset) -> Vec<u8> {
    let mut out = Vec::with_capacity(VALUE_FIXED_BYTES + v.metadata.len());
    out.push(VALUE_VERSION);
    out.extend_from_slice(&v.offset.to_be_bytes());
    out.extend_from_slice(&v.leader_epoch.to_be_bytes());
    out.extend_from_slice(&v.generation.to_be_bytes());
    out.extend_from_slice(&v.committed_at_ms.to_be_bytes());
    out.extend_from_slice(&(v.metadata.len() as u32).to_be_bytes());
    out.extend_from_slice(v.metadata.as_bytes());
    out
}

fn decode(group: &str, b: &[u8]) -> Result<CommittedOffset> {
    let corrupt = |reason: &str| OffsetStoreError::Corrupt {
        group: group.to_string(),
        reason: reason.to_string(),
    };
    if b.len() < VALUE_FIXED_BYTES || b[0] != VALUE_VERSION {
        return Err(corrupt("bad length or version"));
    }
    let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let i32_at = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    let meta_len = i32_at(25) as u32 as usize;
    let meta = b
        .get(VALUE_FIXED_BYTES..VALUE_FIXED_BYTES + meta_len)
        .ok_or_else(|| corrupt("metadata runs past the value"))?;
    Ok(CommittedOffset {
        offset: i64_at(1),
        leader_epoch: i32_at(9),
        generation: i32_at(13),
        committed_at_ms: i64_at(17),
        metadata: String::from_utf8(meta.to_vec()).map_err(|_| corrupt("metadata is not UTF-8"))?,
    })
}

impl OffsetStore {
    /// Opens (creating) the environment in `dir` with room for `map_bytes`. Blocking.
    pub fn open(dir: &Path, map_bytes: usize) -> Result<OffsetStore> {
        let lmdb = |source| OffsetStoreError::Lmdb {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(|e| lmdb(heed::Error::Io(e)))?;
        let mut options = EnvOpenOptions::new();
        options.map_size(map_bytes).max_dbs(3);
        // SAFETY: NO_SYNC only defers durability to `sync`, which the broker calls before
        // acknowledging a commit; the environment is opened once per process.
        let env = unsafe {
            options.flags(EnvFlags::NO_SYNC);
            options.open(dir)
        }
        .map_err(lmdb)?;
        let mut txn = env.write_txn().map_err(lmdb)?;
        let db = env
            .create_database::<Bytes, Bytes>(&mut txn, Some("group_offsets"))
            .map_err(lmdb)?;
        let pending = env
            .create_database::<Bytes, Bytes>(&mut txn, Some("pending_txn_offsets"))
            .map_err(lmdb)?;
        let transactions = env
            .create_database::<Bytes, Bytes>(&mut txn, Some("transactions"))
            .map_err(lmdb)?;
        txn.commit().map_err(lmdb)?;
        Ok(OffsetStore {
            path: dir.to_path_buf(),
            env,
            db,
            pending,
            transactions,
        })
    }

    fn lmdb(&self, source: heed::Error) -> OffsetStoreError {
        OffsetStoreError::Lmdb {
            path: self.path.clone(),
            source,
        }
    }

    /// Commits the offsets of one OffsetCommit request in one transaction, each fenced
    /// by `fence`; returns what happened to each. In the page cache when this returns;
    /// durable after [`sync`](Self::sync).
    pub fn commit(
        &self,
        group: &str,
        fence: Fence,
        offsets: &[(&str, u32, CommittedOffset)],
    ) -> Result<Vec<CommitOutcome>> {
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        let outcomes = self.commit_in(&mut txn, group, fence, offsets)?;
        txn.commit().map_err(|e| self.lmdb(e))?;
        Ok(outcomes)
    }

    /// [`commit`](Self::commit) inside the write transaction `txn`.
    fn commit_in(
        &self,
        txn: &mut heed::RwTxn<'_>,
        group: &str,
        fence: Fence,
        offsets: &[(&str, u32, CommittedOffset)],
    ) -> Result<Vec<CommitOutcome>> {
        let keys: Vec<Vec<u8>> = offsets
            .iter()
            .map(|(topic, p, _)| key(group, topic, *p))
            .collect::<Result<_>>()?;
        let mut outcomes = Vec::with_capacity(offsets.len());
        for (k, (_, _, new)) in keys.iter().zip(offsets) {
            let stored = match self.db.get(txn, k).map_err(|e| self.lmdb(e))? {
                Some(bytes) => Some(decode(group, bytes)?),
                None => None,
            };
            let apply = match (fence, &stored) {
                (Fence::Reset, _) | (Fence::Generation(_), None) => true,
                (Fence::Generation(g), Some(s)) => s.generation <= g && s.offset < new.offset,
            };
            if apply {
                self.db
                    .put(txn, k, &encode(new))
                    .map_err(|e| self.lmdb(e))?;
                outcomes.push(CommitOutcome::Applied);
            } else {
                outcomes.push(CommitOutcome::Unchanged);
            }
        }
        Ok(outcomes)
    }

    /// The committed offset of one partition.
    pub fn fetch(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
    ) -> Result<Option<CommittedOffset>> {
        let k = key(group, topic, partition)?;
        let txn = self.env.read_txn().map_err(|e| self.lmdb(e))?;
        match self.db.get(&txn, &k).map_err(|e| self.lmdb(e))? {
            Some(bytes) => decode(group, bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Every committed offset of `group`, by topic and partition.
    pub fn fetch_group(&self, group: &str) -> Result<Vec<(String, u32, CommittedOffset)>> {
        let prefix = group_prefix(group);
        let txn = self.env.read_txn().map_err(|e| self.lmdb(e))?;
        let mut out = Vec::new();
        for entry in self
            .db
            .prefix_iter(&txn, &prefix)
            .map_err(|e| self.lmdb(e))?
        {
            let (k, v) = entry.map_err(|e| self.lmdb(e))?;
            let (topic, partition) =
                split_key(group, k).ok_or_else(|| OffsetStoreError::Corrupt {
                    group: group.to_string(),
                    reason: "unreadable key".into(),
                })?;
            out.push((topic, partition, decode(group, v)?));
        }
        Ok(out)
    }

    /// Every group with committed offsets.
    pub fn groups(&self) -> Result<Vec<String>> {
        let txn = self.env.read_txn().map_err(|e| self.lmdb(e))?;
        let mut out: Vec<String> = Vec::new();
        for entry in self.db.iter(&txn).map_err(|e| self.lmdb(e))? {
            let (k, _) = entry.map_err(|e| self.lmdb(e))?;
            let len = u16::from_be_bytes([k[0], k[1]]) as usize;
            if let Some(name) = k.get(2..2 + len).and_then(|n| std::str::from_utf8(n).ok()) {
                if out.last().map(String::as_str) != Some(name) {
                    out.push(name.to_string());
                }
            }
        }
        Ok(out)
    }

    /// Deletes every committed offset of `group`; returns how many there were.
    pub fn delete_group(&self, group: &str) -> Result<usize> {
        let prefix = group_prefix(group);
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        let keys: Vec<Vec<u8>> = self
            .db
            .prefix_iter(&txn, &prefix)
            .map_err(|e| self.lmdb(e))?
            .map(|entry| entry.map(|(k, _)| k.to_vec()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| self.lmdb(e))?;
        for k in &keys {
            self.db.delete(&mut txn, k).map_err(|e| self.lmdb(e))?;
        }
        txn.commit().map_err(|e| self.lmdb(e))?;
        Ok(keys.len())
    }

    /// Deletes `group`'s committed offsets of `partitions` (topic, partition); returns
    /// how many existed. Not synced: call [`Self::sync`]. Blocking.
    pub fn delete_offsets(&self, group: &str, partitions: &[(String, u32)]) -> Result<usize> {
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        let mut deleted = 0;
        for (topic, partition) in partitions {
            if self
                .db
                .delete(&mut txn, &key(group, topic, *partition)?)
                .map_err(|e| self.lmdb(e))?
            {
                deleted += 1;
            }
        }
        txn.commit().map_err(|e| self.lmdb(e))?;
        Ok(deleted)
    }

    /// Makes every commit so far durable (fsync). Blocking.
    pub fn sync(&self) -> Result<()> {
        self.env.force_sync().map_err(|e| self.lmdb(e))
    }
}

/// The committed offsets the metrics serve at each scrape: every group's, read in
/// one pass per group (a read transaction each, beside the shards' writers).
impl CommittedOffsets for OffsetStore {
    fn committed_offsets(
        &self,
    ) -> std::result::Result<Vec<CommittedRow>, Box<dyn std::error::Error>> {
        let mut rows = Vec::new();
        for group in self.groups()? {
            // A group deleted since the list was read has nothing to serve.
            let Ok(offsets) = self.fetch_group(&group) else {
                continue;
            };
            rows.extend(
                offsets
                    .into_iter()
                    .map(|(topic, partition, c)| CommittedRow {
                        group: group.clone(),
                        topic,
                        partition,
                        offset: c.offset,
                    }),
            );
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_support::test_dir;
    use std::collections::HashMap;

    fn at(offset: i64, generation: i32) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: -1,
            generation,
            committed_at_ms: 1_700_000_000_000,
            metadata: format!("m{offset}"),
        }
    }

    fn commit(
        store: &OffsetStore,
        group: &str,
        fence: Fence,
        offset: i64,
        generation: i32,
    ) -> CommitOutcome {
        store
            .commit(group, fence, &[("t", 0, at(offset, generation))])
            .expect("commit")[0]
    }

    #[test]
    fn offsets_only_move_forward_within_a_generation_and_old_generations_are_fenced() {
        let dir = test_dir();
        let store = OffsetStore::open(dir.path(), 1 << 20).expect("open");
        assert_eq!(
            commit(&store, "g", Fence::Generation(3), 10, 3),
            CommitOutcome::Applied
        );
        assert_eq!(
            commit(&store, "g", Fence::Generation(3), 10, 3),
            CommitOutcome::Unchanged,
            "same position again"
        );
        assert_eq!(
            commit(&store, "g", Fence::Generation(3), 5, 3),
            CommitOutcome::Unchanged,
            "never backwards"
        );
        assert_eq!(
            commit(&store, "g", Fence::Generation(4), 20, 4),
            CommitOutcome::Applied
        );
        assert_eq!(
            commit(&store, "g", Fence::Generation(3), 30, 3),
            CommitOutcome::Unchanged,
            "a member of generation 3 cannot clobber generation 4's progress"
        );
        assert_eq!(
            store
                .fetch("g", "t", 0)
                .expect("fetch")
                .map(|c| (c.offset, c.generation)),
            Some((20, 4))
        );
        assert_eq!(
            commit(&store, "g", Fence::Reset, 2, -1),
            CommitOutcome::Applied,
            "a reset moves backwards"
        );
        assert_eq!(
            store.fetch("g", "t", 0).expect("fetch").map(|c| c.offset),
            Some(2)
        );
        assert_eq!(
            commit(&store, "g", Fence::Generation(5), 3, 5),
            CommitOutcome::Applied
        );
    }

    #[test]
    fn groups_are_isolated_fetched_whole_deleted_and_kept_across_reopen() {
        let dir = test_dir();
        {
            let store = OffsetStore::open(dir.path(), 1 << 20).expect("open");
            for (group, n) in [("a", 3u32), ("ab", 2), ("b", 1)] {
                let offsets: Vec<(&str, u32, CommittedOffset)> = (0..n)
                    .map(|p| ("topic", p, at(i64::from(p) + 100, 1)))
                    .collect();
                store
                    .commit(group, Fence::Generation(1), &offsets)
                    .expect("commit");
            }
            store.sync().expect("sync");
        }
        let store = OffsetStore::open(dir.path(), 1 << 20).expect("reopen");
        let a = store.fetch_group("a").expect("fetch");
        assert_eq!(a.len(), 3, "group a does not see group ab");
        assert_eq!(a[2], ("topic".to_string(), 2, at(102, 1)));
        assert_eq!(store.delete_group("a").expect("delete"), 3);
        assert!(store.fetch_group("a").expect("fetch").is_empty());
        assert_eq!(store.fetch_group("ab").expect("fetch").len(), 2);
        assert!(matches!(
            store.fetch(&"g".repeat(400), &"t".repeat(200), 0),
            Err(OffsetStoreError::KeyTooLong { .. })
        ));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 32, ..Default::default() })]

        /// Random commits agree with the SQL rule applied to an in-memory table.
        #[test]
        fn commits_follow_the_fencing_rule(ops in proptest::collection::vec((0u32..3, -1i32..4, 0i64..50), 1..80)) {
            let dir = test_dir();
            let store = OffsetStore::open(dir.path(), 1 << 20).expect("open");
            let mut model: HashMap<u32, (i64, i32)> = HashMap::new();
            for (partition, generation, offset) in ops {
                let fence = if generation < 0 { Fence::Reset } else { Fence::Generation(generation) };
                let outcome = store.commit("g", fence, &[("t", partition, at(offset, generation))]).expect("commit")[0];
                let apply = match (fence, model.get(&partition)) {
                    (Fence::Reset, _) | (_, None) => true,
                    (Fence::Generation(g), Some(&(o, sg))) => sg <= g && o < offset,
                };
                if apply {
                    model.insert(partition, (offset, generation));
                }
                proptest::prop_assert_eq!(outcome == CommitOutcome::Applied, apply);
            }
            for (partition, (offset, generation)) in model {
                let stored = store.fetch("g", "t", partition).expect("fetch").expect("stored");
                proptest::prop_assert_eq!((stored.offset, stored.generation), (offset, generation));
            }
        }
    }
}
