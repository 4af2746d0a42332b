//! Offsets a transactional producer committed (TxnOffsetCommit) that wait for their
//! transaction to end: invisible to OffsetFetch, committed with the group's fencing when
//! the COMMIT marker arrives, dropped at ABORT. Kept in LMDB beside the committed
//! offsets, so they survive a restart and the end is one LMDB transaction. Key: the
//! group's prefix, then the producer id (8 bytes, big-endian); value: JSON.

use heed::RwTxn;
use serde::{Deserialize, Serialize};

use super::{group_prefix, CommittedOffset, Fence, OffsetStore, OffsetStoreError, Result};

/// One producer's pending offsets in one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingOffsets {
    /// How the commit is fenced when it is applied.
    pub fence: Fence,
    /// Topic, partition, offset; a later TxnOffsetCommit of a partition replaces it.
    pub offsets: Vec<(String, u32, CommittedOffset)>,
}

fn pending_key(group: &str, producer_id: i64) -> Vec<u8> {
    let mut k = group_prefix(group);
    k.extend_from_slice(&producer_id.to_be_bytes());
    k
}

impl OffsetStore {
    /// Adds `offsets` to what `producer_id`'s open transaction commits for `group`. Not
    /// synced: call [`sync`](Self::sync). Blocking.
    pub fn add_pending(
        &self,
        group: &str,
        producer_id: i64,
        fence: Fence,
        offsets: &[(String, u32, CommittedOffset)],
    ) -> Result<()> {
        let k = pending_key(group, producer_id);
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        let mut pending = self
            .read_pending(&txn, group, &k)?
            .unwrap_or(PendingOffsets {
                fence,
                offsets: Vec::new(),
            });
        pending.fence = fence;
        for (topic, partition, offset) in offsets {
            pending
                .offsets
                .retain(|(t, p, _)| !(t == topic && p == partition));
            pending
                .offsets
                .push((topic.clone(), *partition, offset.clone()));
        }
        let value = serde_json::to_vec(&pending).map_err(|e| self.corrupt(group, e))?;
        self.pending
            .put(&mut txn, &k, &value)
            .map_err(|e| self.lmdb(e))?;
        txn.commit().map_err(|e| self.lmdb(e))
    }

    /// Ends `producer_id`'s pending offsets in `group`: committed (with their fencing)
    /// when `commit`, dropped otherwise, in one LMDB transaction. Returns how many there
    /// were. Not synced. Blocking.
    pub fn end_pending(&self, group: &str, producer_id: i64, commit: bool) -> Result<usize> {
        let k = pending_key(group, producer_id);
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        let Some(pending) = self.read_pending(&txn, group, &k)? else {
            return Ok(0);
        };
        if commit {
            let refs: Vec<(&str, u32, CommittedOffset)> = pending
                .offsets
                .iter()
                .map(|(t, p, c)| (t.as_str(), *p, c.clone()))
                .collect();
            self.commit_in(&mut txn, group, pending.fence, &refs)?;
        }
        self.pending
            .delete(&mut txn, &k)
            .map_err(|e| self.lmdb(e))?;
        txn.commit().map_err(|e| self.lmdb(e))?;
        Ok(pending.offsets.len())
    }

    /// The partitions of `group` with offsets pending in some open transaction
    /// (OffsetFetch's RequireStable answers UNSTABLE_OFFSET_COMMIT for them).
    pub fn pending_partitions(&self, group: &str) -> Result<Vec<(String, u32)>> {
        Ok(self
            .pending_of(group)?
            .into_iter()
            .flat_map(|p| p.offsets.into_iter().map(|(t, p, _)| (t, p)))
            .collect())
    }

    /// The highest generation `group`'s pending offsets are fenced with (0 when none
    /// is): a transaction's marker may commit them after the group moved to a new
    /// coordinator, whose generations must not start below it. Blocking.
    pub fn pending_generation(&self, group: &str) -> Result<i32> {
        Ok(self
            .pending_of(group)?
            .iter()
            .filter_map(|p| match p.fence {
                Fence::Generation(g) => Some(g),
                Fence::Reset => None,
            })
            .fold(0, i32::max))
    }

    /// Every producer's pending offsets in `group`. Blocking.
    fn pending_of(&self, group: &str) -> Result<Vec<PendingOffsets>> {
        let prefix = group_prefix(group);
        let txn = self.env.read_txn().map_err(|e| self.lmdb(e))?;
        let mut out = Vec::new();
        for entry in self
            .pending
            .prefix_iter(&txn, &prefix)
            .map_err(|e| self.lmdb(e))?
        {
            let (k, v) = entry.map_err(|e| self.lmdb(e))?;
            if k.len() != prefix.len() + 8 {
                continue; // A longer group name sharing the prefix bytes.
            }
            out.push(serde_json::from_slice(v).map_err(|e| self.corrupt(group, e))?);
        }
        Ok(out)
    }

    /// The groups in which `producer_id` has pending offsets.
    pub fn pending_groups(&self, producer_id: i64) -> Result<Vec<String>> {
        let txn = self.env.read_txn().map_err(|e| self.lmdb(e))?;
        let mut out = Vec::new();
        for entry in self.pending.iter(&txn).map_err(|e| self.lmdb(e))? {
            let (k, _) = entry.map_err(|e| self.lmdb(e))?;
            let len = u16::from_be_bytes([k[0], k[1]]) as usize;
            let id = k.get(2 + len..).and_then(|b| <[u8; 8]>::try_from(b).ok());
            let name = k.get(2..2 + len).and_then(|n| std::str::from_utf8(n).ok());
            if let (Some(id), Some(name)) = (id, name) {
                if i64::from_be_bytes(id) == producer_id {
                    out.push(name.to_string());
                }
            }
        }
        Ok(out)
    }

    fn read_pending(
        &self,
        txn: &RwTxn<'_>,
        group: &str,
        k: &[u8],
    ) -> Result<Option<PendingOffsets>> {
        match self.pending.get(txn, k).map_err(|e| self.lmdb(e))? {
            Some(v) => serde_json::from_slice(v)
                .map(Some)
                .map_err(|e| self.corrupt(group, e)),
            None => Ok(None),
        }
    }

    pub(super) fn corrupt(&self, group: &str, e: serde_json::Error) -> OffsetStoreError {
        OffsetStoreError::Corrupt {
            group: group.to_string(),
            reason: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: -1,
            generation: 1,
            committed_at_ms: 0,
            metadata: String::new(),
        }
    }

    #[test]
    fn pending_offsets_are_invisible_until_committed_and_gone_when_aborted() {
        let dir = tempfile::tempdir().expect("dir");
        let store = OffsetStore::open(dir.path(), 1 << 20).expect("store");
        let f = Fence::Generation(1);
        store
            .add_pending("g", 7, f, &[("t".into(), 0, at(5)), ("t".into(), 1, at(9))])
            .expect("add");
        store
            .add_pending("g", 7, f, &[("t".into(), 0, at(6))])
            .expect("replace");
        store
            .add_pending("g", 8, f, &[("t".into(), 2, at(1))])
            .expect("add");
        assert_eq!(store.fetch("g", "t", 0).expect("fetch"), None);
        store
            .add_pending("g", 9, Fence::Generation(4), &[("t".into(), 3, at(2))])
            .expect("add");
        assert_eq!(store.pending_generation("g").expect("generation"), 4);
        assert_eq!(store.pending_generation("h").expect("generation"), 0);
        assert_eq!(store.end_pending("g", 9, false).expect("abort"), 1);
        let mut partitions = store.pending_partitions("g").expect("pending");
        partitions.sort();
        assert_eq!(
            partitions,
            vec![("t".into(), 0), ("t".into(), 1), ("t".into(), 2)]
        );
        assert_eq!(store.pending_groups(7).expect("groups"), vec!["g"]);
        assert_eq!(store.end_pending("g", 7, true).expect("commit"), 2);
        assert_eq!(
            store.fetch("g", "t", 0).expect("fetch").map(|c| c.offset),
            Some(6)
        );
        assert_eq!(store.end_pending("g", 8, false).expect("abort"), 1);
        assert_eq!(store.fetch("g", "t", 2).expect("fetch"), None);
        assert!(store.pending_partitions("g").expect("pending").is_empty());
        assert_eq!(store.end_pending("g", 8, true).expect("again"), 0);
    }
}
