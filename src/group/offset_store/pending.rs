//! Offsets a transactional producer committed (TxnOffsetCommit) that wait for their
//! transaction to end: invisible to OffsetFetch, committed with the group's fencing when
//! the COMMIT marker arrives, dropped at ABORT. Kept in LMDB beside the committed
//! offsets, so they survive a restart and the end is one LMDB transaction. Key: the
//! group's prefix, then the producer id (8 bytes, big-endian); value: JSON.
//!
//! The offsets remember the producer epoch and protocol of the transaction that wrote
//! them, so only a marker of that transaction ends them ([`PendingOffsets::ended_by`]):
//! a marker request delayed from an earlier transaction of the same producer (resent
//! by its coordinator after a timeout, or left queued by a killed one) must not commit
//! or drop the offsets of the next.

use heed::RwTxn;
use serde::{Deserialize, Serialize};

use super::{group_prefix, CommittedOffset, Fence, OffsetStore, OffsetStoreError, Result};
use crate::ids::{ProducerEpoch, ProducerIdentity};

/// The transaction a TxnOffsetCommit commits its offsets in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingTxn {
    /// The producer.
    pub producer_id: i64,
    /// The epoch the transaction runs at.
    pub producer_epoch: i16,
    /// Transactions V2 (TxnOffsetCommit v5+): its markers carry the next epoch.
    pub v2: bool,
}

/// One producer's pending offsets in one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingOffsets {
    /// How the commit is fenced when it is applied.
    pub fence: Fence,
    /// Topic, partition, offset; a later TxnOffsetCommit of a partition replaces it.
    pub offsets: Vec<(String, u32, CommittedOffset)>,
    /// The epoch of the transaction that wrote them (-1: written before epochs were
    /// recorded, ended by any marker of the producer).
    #[serde(default = "unknown_epoch")]
    pub producer_epoch: i16,
    /// True when that transaction speaks transactions V2.
    #[serde(default)]
    pub v2: bool,
}

fn unknown_epoch() -> i16 {
    -1
}

impl PendingOffsets {
    fn new(txn: PendingTxn, fence: Fence) -> Self {
        PendingOffsets {
            fence,
            offsets: Vec::new(),
            producer_epoch: txn.producer_epoch,
            v2: txn.v2,
        }
    }

    /// True when a marker of the producer at `marker_epoch` ends these offsets' own
    /// transaction: in V1 a marker at their epoch or a later (fencing) one; in V2, whose
    /// every end bumps the epoch, only a later one — a marker at their epoch ended the
    /// transaction before (Kafka's TV2 marker rule). An epoch that cannot be bumped
    /// any more is ended by a marker at it.
    pub fn ended_by(&self, marker_epoch: i16) -> bool {
        let epoch = self.producer_epoch;
        match (epoch < 0, self.v2) {
            (true, _) => true,
            (false, true) => {
                marker_epoch > epoch || (epoch >= ProducerEpoch::MAX.0 && marker_epoch >= epoch)
            }
            (false, false) => marker_epoch >= epoch,
        }
    }
}

fn pending_key(group: &str, producer_id: i64) -> Vec<u8> {
    let mut k = group_prefix(group);
    k.extend_from_slice(&producer_id.to_be_bytes());
    k
}

impl OffsetStore {
    /// Adds `offsets` to what transaction `txn` commits for `group`. Returns false, and
    /// stores nothing, when the producer has offsets pending here from a later epoch
    /// (`txn` is a fenced zombie's). Offsets pending from an earlier epoch belong to a
    /// transaction that has ended without its marker reaching them, so `txn`'s replace
    /// them. Not synced: call [`sync`](Self::sync). Blocking.
    pub fn add_pending(
        &self,
        group: &str,
        txn: PendingTxn,
        fence: Fence,
        offsets: &[(String, u32, CommittedOffset)],
    ) -> Result<bool> {
        let k = pending_key(group, txn.producer_id);
        let mut wtxn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        let held = self.read_pending(&wtxn, group, &k)?;
        let mut pending = match held {
            Some(p) if p.producer_epoch > txn.producer_epoch && txn.producer_epoch >= 0 => {
                return Ok(false);
            }
            Some(p) if p.producer_epoch == txn.producer_epoch => p,
            Some(p) => {
                tracing::warn!(
                    group,
                    producer_id = txn.producer_id,
                    epoch = p.producer_epoch,
                    next = txn.producer_epoch,
                    "pending offsets of an ended transaction replaced"
                );
                PendingOffsets::new(txn, fence)
            }
            None => PendingOffsets::new(txn, fence),
        };
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
            .put(&mut wtxn, &k, &value)
            .map_err(|e| self.lmdb(e))?;
        wtxn.commit().map_err(|e| self.lmdb(e))?;
        Ok(true)
    }

    /// Ends `producer_id`'s pending offsets in `group` when a marker at `marker_epoch`
    /// ends their transaction ([`PendingOffsets::ended_by`]): committed (with their
    /// fencing) when `commit`, dropped otherwise, in one LMDB transaction. Returns how
    /// many it ended. Not synced. Blocking.
    pub fn end_pending(
        &self,
        group: &str,
        marker: ProducerIdentity,
        commit: bool,
    ) -> Result<usize> {
        let (producer_id, marker_epoch) = (marker.id.0, marker.epoch.0);
        let k = pending_key(group, producer_id);
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        let Some(pending) = self.read_pending(&txn, group, &k)? else {
            return Ok(0);
        };
        if !pending.ended_by(marker_epoch) {
            tracing::info!(
                group,
                producer_id,
                epoch = pending.producer_epoch,
                marker_epoch,
                "a marker of an earlier transaction left pending offsets alone"
            );
            return Ok(0);
        }
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

    fn v1(producer_id: i64) -> PendingTxn {
        PendingTxn {
            producer_id,
            producer_epoch: 0,
            v2: false,
        }
    }

    #[test]
    fn pending_offsets_are_invisible_until_committed_and_gone_when_aborted() {
        let dir = tempfile::tempdir().expect("dir");
        let store = OffsetStore::open(dir.path(), 1 << 20).expect("store");
        let f = Fence::Generation(1);
        let added = |txn, fence, offsets: &[(String, u32, CommittedOffset)]| {
            assert!(store.add_pending("g", txn, fence, offsets).expect("add"));
        };
        added(v1(7), f, &[("t".into(), 0, at(5)), ("t".into(), 1, at(9))]);
        added(v1(7), f, &[("t".into(), 0, at(6))]);
        added(v1(8), f, &[("t".into(), 2, at(1))]);
        assert_eq!(store.fetch("g", "t", 0).expect("fetch"), None);
        added(v1(9), Fence::Generation(4), &[("t".into(), 3, at(2))]);
        assert_eq!(store.pending_generation("g").expect("generation"), 4);
        assert_eq!(store.pending_generation("h").expect("generation"), 0);
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(9, 0), false)
                .expect("abort"),
            1
        );
        let mut partitions = store.pending_partitions("g").expect("pending");
        partitions.sort();
        assert_eq!(
            partitions,
            vec![("t".into(), 0), ("t".into(), 1), ("t".into(), 2)]
        );
        assert_eq!(store.pending_groups(7).expect("groups"), vec!["g"]);
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(7, 0), true)
                .expect("commit"),
            2
        );
        assert_eq!(
            store.fetch("g", "t", 0).expect("fetch").map(|c| c.offset),
            Some(6)
        );
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(8, 0), false)
                .expect("abort"),
            1
        );
        assert_eq!(store.fetch("g", "t", 2).expect("fetch"), None);
        assert!(store.pending_partitions("g").expect("pending").is_empty());
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(8, 0), true)
                .expect("again"),
            0
        );
    }

    #[test]
    fn only_a_marker_of_their_own_transaction_ends_pending_offsets() {
        let dir = tempfile::tempdir().expect("dir");
        let store = OffsetStore::open(dir.path(), 1 << 20).expect("store");
        let f = Fence::Generation(1);
        let txn = |producer_epoch, v2| PendingTxn {
            producer_id: 7,
            producer_epoch,
            v2,
        };
        let offset = |o| [("t".to_string(), 0, at(o))];
        // V2 at epoch 5: the marker of the transaction before (epoch 5) is late.
        assert!(store
            .add_pending("g", txn(5, true), f, &offset(10))
            .expect("add"));
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(7, 5), false)
                .expect("late"),
            0
        );
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(7, 4), false)
                .expect("older"),
            0
        );
        // A zombie of epoch 4 stores nothing.
        assert!(!store
            .add_pending("g", txn(4, true), f, &offset(99))
            .expect("zombie"));
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(7, 6), true)
                .expect("own"),
            1
        );
        assert_eq!(
            store.fetch("g", "t", 0).expect("fetch").map(|c| c.offset),
            Some(10)
        );
        // V1 at epoch 6: its own marker carries epoch 6, a fencing abort a later one.
        assert!(store
            .add_pending("g", txn(6, false), f, &offset(11))
            .expect("add"));
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(7, 5), true)
                .expect("stale"),
            0
        );
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(7, 6), true)
                .expect("own"),
            1
        );
        assert!(store
            .add_pending("g", txn(6, false), f, &offset(12))
            .expect("add"));
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(7, 7), false)
                .expect("fenced"),
            1
        );
        assert_eq!(
            store.fetch("g", "t", 0).expect("fetch").map(|c| c.offset),
            Some(11)
        );
        // Offsets an ended transaction left (its marker never came) give way to the next.
        assert!(store
            .add_pending("g", txn(8, true), f, &offset(13))
            .expect("add"));
        assert!(store
            .add_pending("g", txn(9, true), f, &offset(14))
            .expect("next"));
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(7, 10), true)
                .expect("own"),
            1
        );
        assert_eq!(
            store.fetch("g", "t", 0).expect("fetch").map(|c| c.offset),
            Some(14)
        );
        // An epoch that cannot be bumped is ended by a marker at it.
        assert!(store
            .add_pending("g", txn(ProducerEpoch::MAX.0, true), f, &offset(15))
            .expect("add"));
        assert_eq!(
            store
                .end_pending("g", ProducerIdentity::new(7, ProducerEpoch::MAX.0), true)
                .expect("last"),
            1
        );
    }
}
