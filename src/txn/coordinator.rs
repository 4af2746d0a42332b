//! One shard's transaction coordinator: the durable side of [`state`](super::state).
//! Requests for one transactional id run one at a time (a lock per id); each change is
//! appended to the id's journal partition on a cluster (committed on every in-sync
//! replica), written to the host's LMDB and synced before the caller answers. Which ids
//! this shard coordinates, and where their markers go, is the shard's business
//! (`shard::txn_routing`).

use std::sync::Arc;

use kafka_protocol::ResponseError;

use super::{peer::Peers, state::TxnMetadata};
use crate::group::{
    journal::{apply_to, Journal, JournalError, JournalRecord},
    offset_store::OffsetStore,
    offset_syncer::OffsetSyncer,
};
use crate::keyed_lock::{KeyLock, KeyedLocks};
use crate::storage::StorageError;

/// Longest transactional id (LMDB's key limit).
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = crate::group::offset_store::KEY_BYTES_MAX;

/// A shard's transaction coordinator. `!Send`.
pub struct TxnCoordinator {
    store: Arc<OffsetStore>,
    peers: Peers,
    syncer: OffsetSyncer,
    locks: KeyedLocks<String>,
}

impl TxnCoordinator {
    /// A coordinator over the host's `store`, reaching other nodes through `peers`.
    pub fn new(store: Arc<OffsetStore>, peers: Peers) -> TxnCoordinator {
        TxnCoordinator {
            peers,
            syncer: OffsetSyncer::new(Arc::clone(&store)),
            store,
            locks: KeyedLocks::default(),
        }
    }

    /// The connections to other nodes that markers and enrolments go over.
    pub fn peers(&self) -> &Peers {
        &self.peers
    }

    /// The lock of `id`, held while a request changes its state.
    pub fn lock(&self, id: &str) -> KeyLock {
        self.locks.lock(&id.to_string())
    }

    /// `id`'s state, if it has one; INVALID_REQUEST for an empty or too long id.
    pub fn get(&self, id: &str) -> Result<Option<TxnMetadata>, ResponseError> {
        // Kafka refuses an empty transactional id as INVALID_REQUEST; LMDB cannot key
        // one longer than its limit.
        if id.is_empty() || id.len() > TRANSACTIONAL_ID_BYTES_MAX {
            return Err(ResponseError::InvalidRequest);
        }
        self.store.transaction(id).map_err(|e| {
            tracing::error!(id, error = %e, "transaction state unreadable");
            ResponseError::KafkaStorageError
        })
    }

    /// Every transactional id this host holds a state for.
    pub fn all(&self) -> Vec<(String, TxnMetadata)> {
        self.store.transactions().unwrap_or_else(|e| {
            tracing::error!(error = %e, "transaction states unreadable");
            Vec::new()
        })
    }

    /// Makes `meta` `id`'s state without waiting for it to be durable, for a completed
    /// transaction: a crash may lose it, and then the coordinator finds the Prepare state
    /// before it and completes the transaction again (its markers are safe to repeat);
    /// the id's next change, which opens a transaction, waits for the sync that covers
    /// this write too. Saves EndTxn one sync of the journal and one of LMDB.
    pub async fn persist_eventually(
        &self,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
    ) -> Result<(), ResponseError> {
        self.write(id, state_record(id, meta), journal, false).await
    }

    /// Makes `meta` `id`'s state: journaled first on a cluster, then written to LMDB
    /// and synced. NOT_COORDINATOR when this shard lost the journal partition meanwhile.
    pub async fn persist(
        &self,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
    ) -> Result<(), ResponseError> {
        self.write(id, state_record(id, meta), journal, true).await
    }

    /// Forgets `id` (expired), durably as [`persist`](Self::persist) writes a state:
    /// journaled first on a cluster, so every replica forgets it.
    pub async fn forget(&self, id: &str, journal: Option<&Journal>) -> Result<(), ResponseError> {
        let record = JournalRecord::TransactionExpired { id: id.to_string() };
        self.write(id, record, journal, true).await
    }

    /// Journals `record` (on a cluster) and applies it to LMDB as every replica of the
    /// journal does, waiting for both to be durable when `durable`.
    async fn write(
        &self,
        id: &str,
        record: JournalRecord,
        journal: Option<&Journal>,
        durable: bool,
    ) -> Result<(), ResponseError> {
        // Held until the change is in LMDB, so a journal snapshot never misses it.
        let _pass = match journal {
            Some(journal) => {
                let appended = if durable {
                    journal.append(&record).await
                } else {
                    journal.append_unwaited(&record).await.map(|(_, pass)| pass)
                };
                Some(appended.map_err(|e| journal_error(id, e))?)
            }
            None => None,
        };
        let store = Arc::clone(&self.store);
        let written = glommio::executor()
            .spawn_blocking(move || apply_to(&store, std::slice::from_ref(&record)))
            .await;
        if let Err(e) = written {
            tracing::error!(id, error = %e, "transaction state not written");
            return Err(ResponseError::KafkaStorageError);
        }
        if !durable {
            return Ok(());
        }
        self.syncer.sync().await.map_err(|e| {
            tracing::error!(id, error = %e, "transaction state not synced");
            ResponseError::KafkaStorageError
        })
    }
}

/// The journal record that makes `meta` `id`'s state.
fn state_record(id: &str, meta: &TxnMetadata) -> JournalRecord {
    JournalRecord::Transaction {
        id: id.to_string(),
        meta: meta.clone(),
    }
}

/// The Kafka error for a journal append that failed: NOT_COORDINATOR when this shard no
/// longer leads the journal partition (the id is coordinated elsewhere now).
fn journal_error(id: &str, e: JournalError) -> ResponseError {
    tracing::warn!(id, error = %e, "transaction state not journaled");
    match e {
        JournalError::Storage(StorageError::NotLeader(_) | StorageError::Closed(_)) => {
            ResponseError::NotCoordinator
        }
        _ => ResponseError::KafkaStorageError,
    }
}
