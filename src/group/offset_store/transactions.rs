//! Transaction coordinators' states in LMDB, beside the group offsets (one environment
//! per host, one sync for both): transactional id → the bytes its coordinator encoded
//! (`txn::stored` says how). Opaque here: the group layer stores, snapshots and clears
//! them with the journal partition their id maps to, and never reads them. A coordinator
//! writes here (after its journal, on a cluster) before it answers; every replica of the
//! journal applies the same records, so a coordinator that takes over finds the state
//! here.

use super::{OffsetStore, OffsetStoreError, Result};

impl OffsetStoreError {
    /// Transactional id `id`'s stored state is not what its coordinator wrote.
    pub fn corrupt_transaction(id: &str, reason: impl std::fmt::Display) -> OffsetStoreError {
        OffsetStoreError::Corrupt {
            group: format!("transactional id {id}"),
            reason: reason.to_string(),
        }
    }
}

impl OffsetStore {
    /// The stored state of transactional id `id`, if it has one.
    pub fn raw_transaction(&self, id: &str) -> Result<Option<Vec<u8>>> {
        let txn = self.env.read_txn().map_err(|e| self.lmdb(e))?;
        Ok(self
            .transactions
            .get(&txn, id.as_bytes())
            .map_err(|e| self.lmdb(e))?
            .map(<[u8]>::to_vec))
    }

    /// Stores `state` as `id`'s. Not synced: call [`sync`](Self::sync). Blocking.
    pub fn put_raw_transaction(&self, id: &str, state: &[u8]) -> Result<()> {
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        self.transactions
            .put(&mut txn, id.as_bytes(), state)
            .map_err(|e| self.lmdb(e))?;
        txn.commit().map_err(|e| self.lmdb(e))
    }

    /// Forgets transactional id `id` (expired), if it has a state. Not synced: call
    /// [`sync`](Self::sync). Blocking.
    pub fn remove_transaction(&self, id: &str) -> Result<()> {
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        self.transactions
            .delete(&mut txn, id.as_bytes())
            .map_err(|e| self.lmdb(e))?;
        txn.commit().map_err(|e| self.lmdb(e))
    }

    /// Every transactional id with its stored state.
    pub fn raw_transactions(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let txn = self.env.read_txn().map_err(|e| self.lmdb(e))?;
        self.transactions_in(&txn)
    }

    /// [`raw_transactions`](Self::raw_transactions) inside the read transaction `txn`.
    pub(super) fn transactions_in(&self, txn: &heed::RoTxn<'_>) -> Result<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::new();
        for entry in self.transactions.iter(txn).map_err(|e| self.lmdb(e))? {
            let (k, v) = entry.map_err(|e| self.lmdb(e))?;
            out.push((String::from_utf8_lossy(k).into_owned(), v.to_vec()));
        }
        Ok(out)
    }
}
