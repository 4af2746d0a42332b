//! A transactional id's state as the group layer carries it: the JSON of its
//! [`TxnMetadata`], which the offsets journal (`group::journal`) and the LMDB store
//! (`group::offset_store`) hold without reading. Only this module encodes and decodes
//! it, so the group layer never names a transaction's state. JSON because states
//! already on disk and in journals are JSON; a fixed layout is issue 58's to choose.

use super::state::TxnMetadata;
use crate::group::{
    journal::{JournalRecord, OpaqueState},
    offset_store::{OffsetStore, OffsetStoreError},
};

/// The transaction states of an [`OffsetStore`], decoded.
pub trait TxnStates {
    /// The state of transactional id `id`, if it has one. Blocking.
    fn transaction(&self, id: &str) -> Result<Option<TxnMetadata>, OffsetStoreError>;
    /// Every transactional id with its state. Blocking.
    fn transactions(&self) -> Result<Vec<(String, TxnMetadata)>, OffsetStoreError>;
}

impl TxnStates for OffsetStore {
    fn transaction(&self, id: &str) -> Result<Option<TxnMetadata>, OffsetStoreError> {
        self.raw_transaction(id)?
            .map(|stored| decode(id, &stored))
            .transpose()
    }

    fn transactions(&self) -> Result<Vec<(String, TxnMetadata)>, OffsetStoreError> {
        self.raw_transactions()?
            .into_iter()
            .map(|(id, stored)| decode(&id, &stored).map(|meta| (id, meta)))
            .collect()
    }
}

/// The journal record that makes `state` `id`'s (None forgets the id), as the
/// coordinator journals it and every replica applies it.
pub fn record(id: &str, state: Option<&TxnMetadata>) -> JournalRecord {
    match state {
        Some(meta) => JournalRecord::Transaction {
            id: id.to_string(),
            meta: encode(meta),
        },
        None => JournalRecord::TransactionExpired { id: id.to_string() },
    }
}

/// `meta` as the journal carries it.
fn encode(meta: &TxnMetadata) -> OpaqueState {
    // Fails only for a map keyed by something other than strings, which a state has
    // none of (its sets are sequences): `a_state_round_trips_through_its_json` holds it.
    OpaqueState::encode(meta).expect("a transaction state always encodes as JSON")
}

fn decode(id: &str, stored: &[u8]) -> Result<TxnMetadata, OffsetStoreError> {
    serde_json::from_slice(stored).map_err(|e| OffsetStoreError::corrupt_transaction(id, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::state::TxnState;

    #[test]
    fn a_state_round_trips_through_its_json() {
        let dir = tempfile::tempdir().expect("dir");
        let store = OffsetStore::open(dir.path(), 1 << 20).expect("store");
        let meta = TxnMetadata {
            producer_id: 7,
            producer_epoch: 3,
            last_producer_epoch: 2,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: [("t".to_string(), 1)].into_iter().collect(),
            groups: ["g".to_string()].into_iter().collect(),
            started_ms: 5,
            updated_ms: 6,
            next_producer_id: Some(8),
            previous_producer: None,
            markers_bump_epoch: true,
        };
        crate::group::journal::apply_to(&store, &[record("id", Some(&meta))]).expect("apply");
        assert_eq!(store.transaction("id").expect("read"), Some(meta.clone()));
        assert_eq!(
            store.transactions().expect("all"),
            vec![("id".to_string(), meta)]
        );
        crate::group::journal::apply_to(&store, &[record("id", None)]).expect("forget");
        assert_eq!(store.transaction("id").expect("read"), None);
        store.put_raw_transaction("bad", b"{").expect("put");
        assert!(store.transaction("bad").is_err());
    }
}
