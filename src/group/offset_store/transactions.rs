//! The transaction coordinators' state in LMDB, beside the group offsets (one
//! environment per host, one sync for both): transactional id → its [`TxnMetadata`] as
//! JSON. A coordinator writes here (after its journal, on a cluster) before it answers;
//! every replica of the journal applies the same records, so a coordinator that takes
//! over finds the state here.

use crate::txn::state::TxnMetadata;

use super::{OffsetStore, OffsetStoreError, Result};

impl OffsetStore {
    /// The state of transactional id `id`, if it has one.
    pub fn transaction(&self, id: &str) -> Result<Option<TxnMetadata>> {
        let txn = self.env.read_txn().map_err(|e| self.lmdb(e))?;
        match self
            .transactions
            .get(&txn, id.as_bytes())
            .map_err(|e| self.lmdb(e))?
        {
            Some(v) => serde_json::from_slice(v)
                .map(Some)
                .map_err(|e| self.corrupt_txn(id, e)),
            None => Ok(None),
        }
    }

    /// Stores `meta` as `id`'s state. Not synced: call [`sync`](Self::sync). Blocking.
    pub fn put_transaction(&self, id: &str, meta: &TxnMetadata) -> Result<()> {
        let value = serde_json::to_vec(meta).map_err(|e| self.corrupt_txn(id, e))?;
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb(e))?;
        self.transactions
            .put(&mut txn, id.as_bytes(), &value)
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

    /// Every transactional id with its state.
    pub fn transactions(&self) -> Result<Vec<(String, TxnMetadata)>> {
        let txn = self.env.read_txn().map_err(|e| self.lmdb(e))?;
        self.transactions_in(&txn)
    }

    /// [`transactions`](Self::transactions) inside the read transaction `txn`.
    pub(super) fn transactions_in(
        &self,
        txn: &heed::RoTxn<'_>,
    ) -> Result<Vec<(String, TxnMetadata)>> {
        let mut out = Vec::new();
        for entry in self.transactions.iter(txn).map_err(|e| self.lmdb(e))? {
            let (k, v) = entry.map_err(|e| self.lmdb(e))?;
            let id = String::from_utf8_lossy(k).into_owned();
            let meta = serde_json::from_slice(v).map_err(|e| self.corrupt_txn(&id, e))?;
            out.push((id, meta));
        }
        Ok(out)
    }

    fn corrupt_txn(&self, id: &str, e: serde_json::Error) -> OffsetStoreError {
        OffsetStoreError::Corrupt {
            group: format!("transactional id {id}"),
            reason: e.to_string(),
        }
    }
}
