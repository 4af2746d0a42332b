//! One offsets-journal partition's share of the store: the groups and transactional ids
//! that map to it (a caller's `owns`), read whole for the journal's snapshot and
//! cleared before the journal is replayed into it.

use heed::RwTxn;

use super::{decode, split_key, CommittedOffset, OffsetStore, PendingOffsets, Result};

/// A group's committed offsets: topic, partition, offset.
pub type GroupOffsets = Vec<(String, u32, CommittedOffset)>;

/// Everything the store holds for the names one journal partition owns.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SlotState {
    /// Each group's committed offsets (topic, partition, offset), groups in key order.
    pub offsets: Vec<(String, GroupOffsets)>,
    /// Each group's offsets pending in a producer's open transaction.
    pub pending: Vec<(String, i64, PendingOffsets)>,
    /// Each transactional id's coordinator state, as its coordinator encoded it.
    pub transactions: Vec<(String, Vec<u8>)>,
}

impl SlotState {
    /// True when the partition owns nothing.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty() && self.pending.is_empty() && self.transactions.is_empty()
    }
}

/// The group name at the head of a key (`u16` length, then the name).
fn group_of(k: &[u8]) -> Option<&str> {
    let len = u16::from_be_bytes([*k.first()?, *k.get(1)?]) as usize;
    std::str::from_utf8(k.get(2..2 + len)?).ok()
}

impl OffsetStore {
    /// Everything stored for the groups and transactional ids `owns` accepts, read in
    /// one LMDB read transaction (one consistent view). Blocking.
    pub fn slot_state(&self, owns: &dyn Fn(&str) -> bool) -> Result<SlotState> {
        let txn = self.env.read_txn().map_err(|e| self.lmdb(e))?;
        let mut state = SlotState::default();
        for entry in self.db.iter(&txn).map_err(|e| self.lmdb(e))? {
            let (k, v) = entry.map_err(|e| self.lmdb(e))?;
            let Some(group) = group_of(k).filter(|g| owns(g)) else {
                continue;
            };
            let (topic, partition) = split_key(group, k).ok_or_else(|| self.unreadable(group))?;
            let offset = decode(group, v)?;
            match state.offsets.last_mut() {
                Some((g, offsets)) if g == group => offsets.push((topic, partition, offset)),
                _ => state
                    .offsets
                    .push((group.to_string(), vec![(topic, partition, offset)])),
            }
        }
        for entry in self.pending.iter(&txn).map_err(|e| self.lmdb(e))? {
            let (k, v) = entry.map_err(|e| self.lmdb(e))?;
            let Some(group) = group_of(k).filter(|g| owns(g)) else {
                continue;
            };
            let producer_id = k
                .get(2 + group.len()..)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(i64::from_be_bytes)
                .ok_or_else(|| self.unreadable(group))?;
            let pending = serde_json::from_slice(v).map_err(|e| self.corrupt(group, e))?;
            state
                .pending
                .push((group.to_string(), producer_id, pending));
        }
        for (id, stored) in self.transactions_in(&txn)? {
            if owns(&id) {
                state.transactions.push((id, stored));
            }
        }
        Ok(state)
    }

    /// Deletes everything stored for the groups and transactional ids `owns` accepts,
    /// in one LMDB transaction; returns how many entries went. Not synced. Blocking.
    pub fn clear_slot(&self, owns: &dyn Fn(&str) -> bool) -> Result<usize> {
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        let mut cleared = 0;
        for db in [self.db, self.pending] {
            let doomed = self.keys_where(&txn, db, &|k| group_of(k).is_some_and(owns))?;
            cleared += self.delete_keys(&mut txn, db, &doomed)?;
        }
        let doomed = self.keys_where(&txn, self.transactions, &|k| {
            std::str::from_utf8(k).is_ok_and(owns)
        })?;
        cleared += self.delete_keys(&mut txn, self.transactions, &doomed)?;
        txn.commit().map_err(|e| self.lmdb(e))?;
        Ok(cleared)
    }

    fn keys_where(
        &self,
        txn: &RwTxn<'_>,
        db: heed::Database<heed::types::Bytes, heed::types::Bytes>,
        wanted: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        for entry in db.iter(txn).map_err(|e| self.lmdb(e))? {
            let (k, _) = entry.map_err(|e| self.lmdb(e))?;
            if wanted(k) {
                out.push(k.to_vec());
            }
        }
        Ok(out)
    }

    fn delete_keys(
        &self,
        txn: &mut RwTxn<'_>,
        db: heed::Database<heed::types::Bytes, heed::types::Bytes>,
        keys: &[Vec<u8>],
    ) -> Result<usize> {
        for k in keys {
            db.delete(txn, k).map_err(|e| self.lmdb(e))?;
        }
        Ok(keys.len())
    }

    fn unreadable(&self, group: &str) -> super::OffsetStoreError {
        super::OffsetStoreError::Corrupt {
            group: group.to_string(),
            reason: "unreadable key".into(),
        }
    }
}
