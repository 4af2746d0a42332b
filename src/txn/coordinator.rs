//! One shard's transaction coordinator: the durable side of [`state`](super::state).
//! Requests for one transactional id run one at a time (a lock per id); each change is
//! appended to the id's journal partition on a cluster (committed on every in-sync
//! replica), written to the host's LMDB and synced before the caller answers — in
//! rounds shared by every id that changes meanwhile ([`StateWriter`]). Which ids
//! this shard coordinates, and where their markers go, is the shard's business
//! (`shard::txn_routing`).

use std::{rc::Rc, sync::Arc};

use kafka_protocol::ResponseError;

use super::{
    peer::Peers,
    state::TxnMetadata,
    state_writer::{self, Durability, StateWriter},
};
use crate::group::{
    journal::{Journal, JournalError},
    offset_store::OffsetStore,
};
use crate::keyed_lock::{KeyLock, KeyedLocks};
use crate::storage::StorageError;

/// Longest transactional id (LMDB's key limit).
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = crate::group::offset_store::KEY_BYTES_MAX;

/// A shard's transaction coordinator. `!Send`.
pub struct TxnCoordinator {
    store: Arc<OffsetStore>,
    peers: Peers,
    writer: Rc<StateWriter>,
    locks: KeyedLocks<String>,
}

impl TxnCoordinator {
    /// A coordinator over the host's `store`, reaching other nodes through `peers`.
    pub fn new(store: Arc<OffsetStore>, peers: Peers) -> TxnCoordinator {
        TxnCoordinator {
            peers,
            writer: StateWriter::new(Arc::clone(&store)),
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

    /// `id`'s state, if it has one — the newest, written to LMDB or still queued to be;
    /// INVALID_REQUEST for an empty or too long id.
    pub fn get(&self, id: &str) -> Result<Option<TxnMetadata>, ResponseError> {
        // Kafka refuses an empty transactional id as INVALID_REQUEST; LMDB cannot key
        // one longer than its limit.
        if id.is_empty() || id.len() > TRANSACTIONAL_ID_BYTES_MAX {
            return Err(ResponseError::InvalidRequest);
        }
        if let Some(pending) = self.writer.pending(id) {
            return Ok(pending);
        }
        self.store.transaction(id).map_err(|e| {
            tracing::error!(id, error = %e, "transaction state unreadable");
            ResponseError::KafkaStorageError
        })
    }

    /// Every transactional id this host holds a state for (the newest, as
    /// [`get`](Self::get) answers).
    pub fn all(&self) -> Vec<(String, TxnMetadata)> {
        let mut pending = self.writer.all_pending();
        let mut all: Vec<(String, TxnMetadata)> = self
            .store
            .transactions()
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "transaction states unreadable");
                Vec::new()
            })
            .into_iter()
            .filter(|(id, _)| !pending.contains_key(id))
            .collect();
        all.extend(pending.drain().filter_map(|(id, m)| m.map(|m| (id, m))));
        all
    }

    /// Makes `meta` `id`'s state without waiting for it to be written, for a completed
    /// transaction: a crash may lose it, and then the coordinator finds the Prepare state
    /// before it and completes the transaction again (its markers are safe to repeat);
    /// the id's next change, which opens a transaction, waits for the sync that covers
    /// this write too, and reads it meanwhile from the queue. Saves EndTxn one sync of
    /// the journal and one of LMDB, and the hand-off that would write it alone.
    pub async fn persist_eventually(
        &self,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
    ) -> Result<(), ResponseError> {
        self.write(id, Some(meta.clone()), journal, Durability::Queued)
            .await
    }

    /// Makes `meta` `id`'s state: journaled first on a cluster, then written to LMDB
    /// and synced. NOT_COORDINATOR when this shard lost the journal partition meanwhile.
    pub async fn persist(
        &self,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
    ) -> Result<(), ResponseError> {
        self.write(id, Some(meta.clone()), journal, Durability::Synced)
            .await
    }

    /// Forgets `id` (expired), durably as [`persist`](Self::persist) writes a state:
    /// journaled first on a cluster, so every replica forgets it.
    pub async fn forget(&self, id: &str, journal: Option<&Journal>) -> Result<(), ResponseError> {
        self.write(id, None, journal, Durability::Synced).await
    }

    /// Journals `state` as `id`'s (on a cluster; None forgets the id) and hands it to
    /// the writer as every replica of the journal applies it; waits for the journal's
    /// commit and the store's sync when `durability` is [`Durability::Synced`].
    async fn write(
        &self,
        id: &str,
        state: Option<TxnMetadata>,
        journal: Option<&Journal>,
        durability: Durability,
    ) -> Result<(), ResponseError> {
        // Held until the change is in LMDB, so a journal snapshot never misses it.
        let pass = match journal {
            Some(journal) => {
                let record = state_writer::record(id, state.as_ref());
                let appended = match durability {
                    Durability::Synced => journal.append(&record).await,
                    Durability::Queued => {
                        journal.append_unwaited(&record).await.map(|(_, pass)| pass)
                    }
                };
                Some(appended.map_err(|e| journal_error(id, e))?)
            }
            None => None,
        };
        self.writer
            .write(id, state, pass, durability)
            .await
            .map_err(|e| {
                tracing::error!(id, error = %e, "transaction state not durable");
                ResponseError::KafkaStorageError
            })
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
