//! One shard's transaction states, the durable side of [`state`](super::state) (Kafka's
//! `TransactionStateManager`; the steps that use it are [`coordinator`](super::coordinator)).
//! Requests for one transactional id run one at a time (a lock per id); each change is
//! appended to a log before the caller answers — the id's journal partition on a
//! cluster (committed on every in-sync replica), the shard's state log on a single
//! host (durable by the shard's group commit) — and then written, unsynced, to the
//! host's LMDB, the view that requests read ([`StateWriter`]).

use std::{rc::Rc, sync::Arc};

use kafka_protocol::ResponseError;

use super::{
    peer::Peers,
    state::TxnMetadata,
    state_log::StateLog,
    state_writer::StateWriter,
    stored::{self, TxnStates},
};
use crate::group::{
    journal::{Journal, JournalError},
    offset_store::OffsetStore,
};
use crate::keyed_lock::{KeyLock, KeyedLocks};
use crate::storage::{
    partition_log::{Durable, Wait},
    StorageError,
};

/// Longest transactional id (LMDB's key limit).
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = crate::group::offset_store::KEY_BYTES_MAX;

/// A shard's transaction states: read, logged and written to LMDB. `!Send`.
pub struct StateManager {
    store: Arc<OffsetStore>,
    peers: Peers,
    writer: Rc<StateWriter>,
    locks: KeyedLocks<String>,
    /// A single host's state log; None on a cluster host, whose changes go to the
    /// journal partition the caller passes.
    local: Option<StateLog>,
}

impl StateManager {
    /// A coordinator over the host's `store`, reaching other nodes through `peers`,
    /// logging its changes to `local` on a single host.
    pub fn new(store: Arc<OffsetStore>, peers: Peers, local: Option<StateLog>) -> StateManager {
        StateManager {
            peers,
            writer: StateWriter::new(Arc::clone(&store)),
            store,
            locks: KeyedLocks::default(),
            local,
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

    /// Makes `meta` `id`'s state without waiting for its log to hold it, for a
    /// completed transaction: a crash may lose it, and then the coordinator finds the
    /// Prepare state before it and completes the transaction again (its markers are
    /// safe to repeat). The id's next change, which the producer waits for, is logged
    /// after it, so a crash that keeps that one keeps this one too.
    pub async fn persist_eventually(
        &self,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
    ) -> Result<(), ResponseError> {
        self.write(id, Some(meta.clone()), journal, false)
            .await
            .map(drop)
    }

    /// True on a single host, whose changes go to this shard's state log: one the
    /// shard's group commit makes durable with the shard's partitions (see
    /// [`persist_ahead`](Self::persist_ahead)).
    pub fn logs_here(&self) -> bool {
        self.local.is_some()
    }

    /// Appends `meta` as `id`'s state to the shard's state log and returns at once with
    /// the wait for it to be durable — for a change whose dependents the caller appends
    /// next to partitions of this shard (a transaction's first batches, or its markers).
    /// The shard's group commit makes appends durable in the order they were made
    /// (each round writes everything appended before it began, and rounds finish in
    /// order), so once a dependent is durable this change is too, and a crash never
    /// keeps a dependent without it. On a cluster host (not [`logs_here`](Self::logs_here))
    /// the journal is replicated apart from the partitions: it persists as
    /// [`persist`](Self::persist) does and returns `None`.
    pub async fn persist_ahead(
        &self,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
    ) -> Result<Option<Durable>, ResponseError> {
        let wait = journal.is_some() || self.local.is_none();
        self.write(id, Some(meta.clone()), journal, wait).await
    }

    /// Waits for what [`persist_ahead`](Self::persist_ahead) appended to be durable.
    pub async fn durable(id: &str, ahead: Option<Durable>) -> Result<(), ResponseError> {
        match ahead {
            Some(durable) => durable.waiting_for(Wait::Committed).await.map_err(|e| {
                tracing::error!(id, error = %e, "transaction state not durable");
                ResponseError::KafkaStorageError
            }),
            None => Ok(()),
        }
    }

    /// Makes `meta` `id`'s state, durably: returns once its log holds it.
    /// NOT_COORDINATOR when this shard lost the journal partition meanwhile.
    pub async fn persist(
        &self,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
    ) -> Result<(), ResponseError> {
        self.write(id, Some(meta.clone()), journal, true)
            .await
            .map(drop)
    }

    /// Forgets `id` (expired), durably as [`persist`](Self::persist) writes a state, so
    /// a replay (and every replica of a journal) forgets it too.
    pub async fn forget(&self, id: &str, journal: Option<&Journal>) -> Result<(), ResponseError> {
        self.write(id, None, journal, true).await.map(drop)
    }

    /// Logs `state` as `id`'s (None forgets the id) in `journal`, or in the shard's
    /// state log without one, waiting for it to be durable there when `wait` (else
    /// returning the wait); then queues it for LMDB.
    async fn write(
        &self,
        id: &str,
        state: Option<TxnMetadata>,
        journal: Option<&Journal>,
        wait: bool,
    ) -> Result<Option<Durable>, ResponseError> {
        let Some(journal) = journal.or(self.local.as_ref().map(StateLog::journal)) else {
            // A cluster host's coordinator always has its journal partition.
            tracing::error!(id, "transaction state change without a log to write it to");
            return Err(ResponseError::CoordinatorNotAvailable);
        };
        let record = stored::record(id, state.as_ref());
        let (durable, pass) = if wait {
            journal.append(&record).await.map(|pass| (None, pass))
        } else {
            journal
                .append_unwaited(&record)
                .await
                .map(|(durable, pass)| (Some(durable), pass))
        }
        .map_err(|e| journal_error(id, e))?;
        // Held until the change is in LMDB, so a checkpoint or snapshot never misses it.
        self.writer.write(id, state, Some(pass));
        Ok(durable)
    }

    /// Checkpoints the shard's state log when it is due (`state_log`); a no-op on a
    /// cluster host.
    pub async fn checkpoint_if_due(&self) {
        let Some(log) = &self.local else {
            return;
        };
        match log.checkpoint_if_due(&self.store).await {
            Ok(Some(start)) => {
                tracing::debug!(log_start = start, "transaction-state log checkpointed")
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "transaction-state log checkpoint failed"),
        }
    }

    /// Closes the shard's state log (what was appended is made durable); later changes
    /// fail with NOT_COORDINATOR.
    pub async fn close(&self) {
        let Some(log) = &self.local else {
            return;
        };
        if let Err(e) = log.close().await {
            tracing::error!(error = %e, "closing the transaction-state log failed");
        }
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
