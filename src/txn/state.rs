//! One transactional id's state at its coordinator, and every transition Kafka's
//! transaction coordinator makes (`TransactionMetadata`, `TransactionCoordinator`,
//! transactions V1 and V2): pure functions from a state and a request to a new state or an
//! error, with no I/O, so the coordinator persists the result before it answers.
//!
//! ```text
//!   Empty ──AddPartitions──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
//!     ▲                        │     ──EndTxn(abort) ──▶ PrepareAbort  ──markers──▶ CompleteAbort
//!     └──InitProducerId────────┘ (from Empty/Complete*: next epoch; from Ongoing:
//!                                 abort at the next epoch, fencing the old producer)
//! ```

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};

/// Where a transaction is. `Prepare*` means the outcome is decided and durable and its
/// markers are being written; the coordinator that holds it must finish it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    /// No transaction open (a fresh id, or one whose producer re-initialised).
    Empty,
    /// Partitions or offsets were added: a transaction is open.
    Ongoing,
    /// Committing: markers are being written.
    PrepareCommit,
    /// Aborting (asked, timed out, or fenced by a new producer): markers are being
    /// written.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name (DescribeTransactions, ListTransactions).
    pub fn kafka_name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    /// True while markers are being written.
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// A transactional id's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMetadata {
    /// The producer id the transactional id maps to.
    pub producer_id: i64,
    /// Its current epoch: requests at any other epoch are fenced.
    pub producer_epoch: i16,
    /// The epoch before the last bump, so a retried InitProducerId whose answer was
    /// lost gets the same answer instead of a second bump (-1 when none).
    pub last_producer_epoch: i16,
    /// `transaction.timeout.ms` the producer asked for.
    pub timeout_ms: i32,
    /// Where the transaction is.
    pub state: TxnState,
    /// The partitions of the open (or ending) transaction.
    pub partitions: BTreeSet<(String, u32)>,
    /// The groups whose offsets the transaction commits (AddOffsetsToTxn).
    pub groups: BTreeSet<String>,
    /// When the open transaction began (ms since the epoch), -1 when none is open.
    pub started_ms: i64,
    /// When the state last changed.
    pub updated_ms: i64,
    /// The producer id the next transaction takes, allocated by an EndTxn of
    /// transactions V2 that used up the epochs of this one; taken up on completion.
    #[serde(default)]
    pub next_producer_id: Option<i64>,
    /// The producer id this one replaced and the epoch of the EndTxn that ended its
    /// last transaction, so a retry of that EndTxn whose answer was lost gets the same
    /// answer instead of being fenced (Kafka's `prevProducerId`).
    #[serde(default)]
    pub previous_producer: Option<(i64, i16)>,
    /// True in a Prepare state whose epoch was bumped past its transaction's own (a
    /// transactions V2 EndTxn, a fencing abort): its markers end only transactions of
    /// earlier epochs, never the producer's next one, open at the marker's epoch.
    #[serde(default)]
    pub markers_bump_epoch: bool,
}

use crate::ids::ProducerEpoch;

/// What InitProducerId decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitOutcome {
    /// The id's new state; answer with its producer id and epoch. `new_producer_id`
    /// asks the caller to allocate an id first (a fresh transactional id, or an epoch
    /// that ran out), which [`with_producer_id`](InitOutcome::with_producer_id) fills in.
    Ready {
        /// The state to persist.
        meta: TxnMetadata,
        /// True when `meta.producer_id` must be replaced by a freshly allocated id.
        new_producer_id: bool,
    },
    /// An open transaction must be aborted first, at the bumped epoch that fences its
    /// producer: persist `meta` (PrepareAbort), finish it, and answer
    /// CONCURRENT_TRANSACTIONS so the client retries.
    AbortFirst(TxnMetadata),
}

impl InitOutcome {
    /// The state with `producer_id` in place when one had to be allocated.
    pub fn with_producer_id(self, producer_id: i64) -> InitOutcome {
        match self {
            InitOutcome::Ready {
                mut meta,
                new_producer_id: true,
            } => {
                meta.producer_id = producer_id;
                InitOutcome::Ready {
                    meta,
                    new_producer_id: false,
                }
            }
            other => other,
        }
    }
}

/// InitProducerId for a transactional id: `current` is its state (`None` when unknown),
/// `expected` the producer id and epoch the client already has (KIP-360), if any.
pub fn init(
    current: Option<&TxnMetadata>,
    timeout_ms: i32,
    timeout_max_ms: i32,
    expected: Option<(i64, i16)>,
    now_ms: i64,
) -> Result<InitOutcome, ResponseError> {
    if timeout_ms <= 0 || timeout_ms > timeout_max_ms {
        return Err(ResponseError::InvalidTransactionTimeout);
    }
    let Some(meta) = current else {
        return Ok(InitOutcome::Ready {
            meta: TxnMetadata {
                producer_id: -1,
                producer_epoch: 0,
                last_producer_epoch: -1,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                groups: BTreeSet::new(),
                started_ms: -1,
                updated_ms: now_ms,
                next_producer_id: None,
                previous_producer: None,
                markers_bump_epoch: false,
            },
            new_producer_id: true,
        });
    };
    if let Some((id, epoch)) = expected {
        if id != meta.producer_id {
            return Err(ResponseError::ProducerFenced);
        }
        if epoch != meta.producer_epoch {
            // A retry of the InitProducerId that made this epoch gets the same answer;
            // anything else older is a fenced producer.
            return if epoch == meta.last_producer_epoch && meta.state == TxnState::Empty {
                Ok(InitOutcome::Ready {
                    meta: meta.clone(),
                    new_producer_id: false,
                })
            } else {
                Err(ResponseError::ProducerFenced)
            };
        }
    }
    match meta.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => {
            Err(ResponseError::ConcurrentTransactions)
        }
        TxnState::Ongoing => Ok(InitOutcome::AbortFirst(fence(meta, now_ms))),
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
            let mut next = meta.clone();
            next.timeout_ms = timeout_ms;
            next.state = TxnState::Empty;
            next.partitions.clear();
            next.groups.clear();
            next.started_ms = -1;
            next.updated_ms = now_ms;
            let new_producer_id = meta.producer_epoch >= ProducerEpoch::MAX.0;
            if new_producer_id {
                next.producer_epoch = 0;
                next.last_producer_epoch = -1;
            } else {
                next.last_producer_epoch = meta.producer_epoch;
                next.producer_epoch = meta.producer_epoch + 1;
            }
            Ok(InitOutcome::Ready {
                meta: next,
                new_producer_id,
            })
        }
    }
}

/// The state that aborts `meta`'s open transaction at the next epoch, fencing the
/// producer that opened it (InitProducerId from a new instance, or a timeout).
pub fn fence(meta: &TxnMetadata, now_ms: i64) -> TxnMetadata {
    let mut next = meta.clone();
    next.last_producer_epoch = meta.producer_epoch;
    next.producer_epoch = meta
        .producer_epoch
        .saturating_add(1)
        .min(ProducerEpoch::MAX.0);
    next.markers_bump_epoch = true;
    next.state = TxnState::PrepareAbort;
    next.updated_ms = now_ms;
    next
}

/// Checks that a request comes from the id's current producer.
fn check_producer(
    meta: Option<&TxnMetadata>,
    producer_id: i64,
    epoch: i16,
) -> Result<&TxnMetadata, ResponseError> {
    let meta = meta
        .filter(|m| m.producer_id == producer_id)
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    if epoch != meta.producer_epoch {
        return Err(ResponseError::ProducerFenced);
    }
    Ok(meta)
}

/// AddPartitionsToTxn and AddOffsetsToTxn: adds `partitions` and `groups` to the open
/// transaction, opening one if none is. `None` when nothing changes (all already in).
pub fn add(
    meta: Option<&TxnMetadata>,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, u32)],
    groups: &[String],
    now_ms: i64,
) -> Result<Option<TxnMetadata>, ResponseError> {
    let meta = check_producer(meta, producer_id, epoch)?;
    if meta.state.is_preparing() {
        return Err(ResponseError::ConcurrentTransactions);
    }
    let ongoing = meta.state == TxnState::Ongoing;
    if ongoing
        && partitions.iter().all(|p| meta.partitions.contains(p))
        && groups.iter().all(|g| meta.groups.contains(g))
    {
        return Ok(None);
    }
    let mut next = meta.clone();
    if !ongoing {
        next.partitions.clear();
        next.groups.clear();
        next.started_ms = now_ms;
        next.state = TxnState::Ongoing;
    }
    next.partitions.extend(partitions.iter().cloned());
    next.groups.extend(groups.iter().cloned());
    next.updated_ms = now_ms;
    Ok(Some(next))
}

/// The brokers' verify-only AddPartitionsToTxn (KIP-890 part 1): `Ok` when the
/// producer's transaction is open at `epoch` with every one of `partitions` in it.
pub fn verify(
    meta: Option<&TxnMetadata>,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, u32)],
) -> Result<(), ResponseError> {
    let meta = check_producer(meta, producer_id, epoch)?;
    if meta.state == TxnState::Ongoing && partitions.iter().all(|p| meta.partitions.contains(p)) {
        Ok(())
    } else {
        Err(ResponseError::InvalidTxnState)
    }
}

/// What EndTxn decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndOutcome {
    /// Persist this Prepare state, then write the markers.
    Prepare(TxnMetadata),
    /// A retry of an EndTxn already completed with the same result: answer OK.
    AlreadyDone,
}

/// Which transaction protocol an EndTxn speaks: V1 keeps the producer's epoch; V2
/// (KIP-890 part 2, EndTxn v5) bumps it with every transaction, so a request delayed
/// from one transaction can never end the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnProtocol {
    /// Transactions V1.
    V1,
    /// Transactions V2: the epoch is bumped by every EndTxn.
    V2,
}

/// EndTxn: commit (`true`) or abort the open transaction. In V2 the Prepare state is at
/// the next epoch (its markers fence the ending producer epoch everywhere), a producer
/// whose epochs ran out is given `fresh_producer_id` for its next transaction, and a
/// retry from the epoch just ended is answered as the first request was.
pub fn end(
    meta: Option<&TxnMetadata>,
    producer_id: i64,
    epoch: i16,
    commit: bool,
    protocol: TxnProtocol,
    now_ms: i64,
) -> Result<EndOutcome, ResponseError> {
    if protocol == TxnProtocol::V2 {
        // A retry from the epoch just ended, also when that EndTxn moved the producer to
        // a fresh producer id (no transaction ended under the new one yet).
        let retried = |m: &TxnMetadata| {
            (m.producer_id == producer_id
                && epoch != m.producer_epoch
                && epoch == m.last_producer_epoch)
                || (m.previous_producer == Some((producer_id, epoch)) && m.producer_epoch == 0)
        };
        if let Some(m) = meta.filter(|m| retried(m)) {
            return match (m.state, commit) {
                (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                    Ok(EndOutcome::AlreadyDone)
                }
                (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                    Err(ResponseError::ConcurrentTransactions)
                }
                _ => Err(ResponseError::ProducerFenced),
            };
        }
    }
    let meta = check_producer(meta, producer_id, epoch)?;
    let prepare = |meta: &TxnMetadata| {
        let mut next = meta.clone();
        next.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        next.updated_ms = now_ms;
        next.markers_bump_epoch = protocol == TxnProtocol::V2;
        if protocol == TxnProtocol::V2 {
            next.last_producer_epoch = meta.producer_epoch;
            next.producer_epoch = meta
                .producer_epoch
                .saturating_add(1)
                .min(ProducerEpoch::MAX.0);
        }
        next
    };
    match (meta.state, commit, protocol) {
        (TxnState::Ongoing, _, _) => Ok(EndOutcome::Prepare(prepare(meta))),
        // V2 clients enrol partitions through their produce requests, so one may end a
        // transaction the coordinator never saw open: it ends empty, at the next epoch.
        (
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort,
            _,
            TxnProtocol::V2,
        ) => {
            let mut next = prepare(meta);
            next.partitions.clear();
            next.groups.clear();
            Ok(EndOutcome::Prepare(next))
        }
        (TxnState::CompleteCommit, true, _) | (TxnState::CompleteAbort, false, _) => {
            Ok(EndOutcome::AlreadyDone)
        }
        (TxnState::PrepareCommit, true, _) | (TxnState::PrepareAbort, false, _) => {
            Err(ResponseError::ConcurrentTransactions)
        }
        _ => Err(ResponseError::InvalidTxnState),
    }
}

/// True when the epoch of a V2 Prepare state cannot be bumped again: its producer must
/// move to a fresh producer id for its next transaction (see [`with_next_producer_id`]).
pub fn needs_next_producer_id(prepared: &TxnMetadata) -> bool {
    prepared.producer_epoch >= ProducerEpoch::MAX.0 && prepared.next_producer_id.is_none()
}

/// `prepared` with the producer id its next transaction takes.
pub fn with_next_producer_id(mut prepared: TxnMetadata, producer_id: i64) -> TxnMetadata {
    prepared.next_producer_id = Some(producer_id);
    prepared
}

/// The producer id and epoch an EndTxn v5 answers with: those the producer's next
/// transaction uses.
pub fn next_producer(meta: &TxnMetadata) -> (i64, i16) {
    match meta.next_producer_id {
        Some(id) => (id, 0),
        None => (meta.producer_id, meta.producer_epoch),
    }
}

/// The state once every marker of a Prepare state is written; `None` when `meta` is not
/// preparing.
pub fn complete(meta: &TxnMetadata, now_ms: i64) -> Option<TxnMetadata> {
    let state = match meta.state {
        TxnState::PrepareCommit => TxnState::CompleteCommit,
        TxnState::PrepareAbort => TxnState::CompleteAbort,
        _ => return None,
    };
    let mut next = meta.clone();
    next.state = state;
    next.partitions.clear();
    next.groups.clear();
    next.started_ms = -1;
    next.updated_ms = now_ms;
    if let Some(id) = next.next_producer_id.take() {
        next.previous_producer = Some((next.producer_id, next.last_producer_epoch));
        next.producer_id = id;
        next.producer_epoch = 0;
        next.last_producer_epoch = -1;
    }
    Some(next)
}

/// The abort a transaction open longer than its timeout gets, at the next epoch so its
/// producer is fenced (Kafka's timeout abort); `None` when it has not timed out.
pub fn expire(meta: &TxnMetadata, now_ms: i64) -> Option<TxnMetadata> {
    (meta.state == TxnState::Ongoing && now_ms - meta.started_ms > i64::from(meta.timeout_ms))
        .then(|| fence(meta, now_ms))
}

/// True when transactional id `meta` may be forgotten: no transaction open or ending,
/// and unchanged for `expiration_ms` (Kafka's `transactional.id.expiration.ms`). Its
/// producer then starts afresh, with a new producer id, as a new id would.
pub fn id_expired(meta: &TxnMetadata, now_ms: i64, expiration_ms: i64) -> bool {
    let idle = matches!(
        meta.state,
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
    );
    idle && now_ms.saturating_sub(meta.updated_ms) > expiration_ms
}

#[cfg(test)]
mod tests;
