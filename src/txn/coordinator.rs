//! The transaction coordinator: every step of a transactional request in one place —
//! InitProducerId ([`Coordinator::init`]), AddPartitionsToTxn and AddOffsetsToTxn
//! ([`Coordinator::add`]), EndTxn ([`Coordinator::end`]) and the background pass that
//! finishes, times out and forgets ([`Coordinator::housekeeping`]). Kafka's
//! `TransactionCoordinator`, with the same shape: the pure rules are
//! [`state`](super::state), the durable states the [`StateManager`], and everything
//! else — which ids this shard coordinates, where markers go and how they are written,
//! new producer ids, the time — comes through one narrow trait, [`TxnHost`], which the
//! shard implements and the unit tests fake (`coordinator_tests.rs`, with a manual
//! clock).

use std::{rc::Rc, time::Duration};

use kafka_protocol::ResponseError;

use super::{
    markers::MarkerTarget,
    state::{self, EndOutcome, InitOutcome, TxnMetadata, TxnProtocol, TxnState},
    state_manager::StateManager,
};
use crate::{
    failure_probe::{self, Probe},
    group::journal::Journal,
    ids::{CoordinatorEpoch, ProducerIdentity},
    keyed_lock::HeldKey,
    metrics::TransactionMetrics,
    storage::partition_log::{Marker, MarkerEnds},
};

/// What an enrolment's caller needs of the open state before it goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnrolWait {
    /// Durable: the client is answered and may write anywhere next, or what follows
    /// is not in a partition log (offsets pending in a group).
    Durable,
    /// Appended: the caller appends the transaction's batches to partitions of this
    /// shard next, which a single host's group commit makes durable only with it
    /// ([`StateManager::persist_ahead`]).
    Appended,
}

/// What the coordinator needs of the shard it runs on: its only ways out.
#[allow(async_fn_in_trait)] // used on the shard only, never sent between threads
pub trait TxnHost {
    /// Catches up with the newest metadata, then gives the journal partition `id`'s
    /// changes go to (None on a single host, whose changes go to the shard's state
    /// log), or NOT_COORDINATOR when this shard does not coordinate `id`.
    async fn coordinating(&self, id: &str) -> Result<Option<Journal>, ResponseError>;
    /// Catches up with the newest metadata.
    async fn catch_up(&self);
    /// True when this shard coordinates `id`, as of the metadata it caught up with.
    fn coordinates(&self, id: &str) -> bool;
    /// This shard's Kafka node id.
    fn node(&self) -> i32;
    /// The nodes that write `meta`'s markers, each with its partitions; `Err` names a
    /// partition or group nobody leads or coordinates right now.
    fn marker_targets(&self, meta: &TxnMetadata) -> Result<Vec<(i32, MarkerTarget)>, String>;
    /// Writes `end`'s markers to `partitions`, which this node leads (or, for
    /// `__consumer_offsets`, whose groups it coordinates), and waits until all are
    /// committed; `Err` says which failed.
    async fn write_markers_here(
        &self,
        end: Marker,
        partitions: &[(String, u32)],
    ) -> Result<(), String>;
    /// Has every node of `targets` write `end`'s markers (WriteTxnMarkers), all at
    /// once; `Ok` when all were written.
    async fn send_markers(&self, end: Marker, targets: &[MarkerTarget]) -> Result<(), String>;
    /// A producer id never handed out before.
    async fn allocate_producer_id(&self) -> Result<i64, ResponseError>;
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The coordinator's limits (Kafka's `transaction.max.timeout.ms` and
/// `transactional.id.expiration.ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoordinatorLimits {
    /// The longest transaction timeout a producer may ask for.
    pub timeout_max: Duration,
    /// How long an idle transactional id is kept.
    pub id_expiration: Duration,
}

/// One shard's transaction coordinator.
pub struct Coordinator {
    states: StateManager,
    metrics: TransactionMetrics,
    limits: CoordinatorLimits,
}

impl Coordinator {
    /// A coordinator keeping its states in `states`, counting in `metrics`.
    pub fn new(
        states: StateManager,
        metrics: TransactionMetrics,
        limits: CoordinatorLimits,
    ) -> Coordinator {
        Coordinator {
            states,
            metrics,
            limits,
        }
    }

    /// The durable states (for the APIs that only read them).
    pub fn states(&self) -> &StateManager {
        &self.states
    }

    /// InitProducerId with transactional id `id`: the id's producer id and next epoch
    /// (a fresh id for a new transactional id or a worn-out epoch). An open transaction
    /// is aborted first, at the epoch that fences its producer; one that cannot be
    /// finished now answers CONCURRENT_TRANSACTIONS, which the client retries.
    /// `expected` is the producer a client re-initialising after an error says it was.
    pub async fn init(
        &self,
        host: &impl TxnHost,
        id: &str,
        timeout_ms: i32,
        expected: Option<ProducerIdentity>,
    ) -> Result<ProducerIdentity, ResponseError> {
        let journal = host.coordinating(id).await?;
        let lock = self.states.lock(id);
        let _held = lock.acquire().await;
        let expected = expected.map(|p| (p.id.0, p.epoch.0));
        let timeout_max_ms = i32::try_from(self.limits.timeout_max.as_millis()).unwrap_or(i32::MAX);
        let mut current = self.states.get(id)?;
        for _ in 0..2 {
            let outcome = state::init(
                current.as_ref(),
                timeout_ms,
                timeout_max_ms,
                expected,
                host.now_ms(),
            )?;
            match outcome {
                InitOutcome::Ready {
                    new_producer_id, ..
                } => {
                    let outcome = if new_producer_id {
                        outcome.with_producer_id(host.allocate_producer_id().await?)
                    } else {
                        outcome
                    };
                    let InitOutcome::Ready { meta, .. } = outcome else {
                        return Err(ResponseError::UnknownServerError);
                    };
                    self.states.persist(id, &meta, journal.as_ref()).await?;
                    return Ok(ProducerIdentity::new(meta.producer_id, meta.producer_epoch));
                }
                InitOutcome::AbortFirst(fenced) => {
                    self.states.persist(id, &fenced, journal.as_ref()).await?;
                    let done = self
                        .finish(host, id, &fenced, journal.as_ref())
                        .await
                        .map_err(|_| ResponseError::ConcurrentTransactions)?;
                    current = Some(done);
                }
            }
        }
        Err(ResponseError::ConcurrentTransactions)
    }

    /// AddPartitionsToTxn and AddOffsetsToTxn at `id`'s coordinator: adds `partitions`
    /// and `groups` to the open transaction (opening one), durably or, as `wait` says,
    /// ahead of the batches its caller appends on this shard.
    pub async fn add(
        &self,
        host: &impl TxnHost,
        id: &str,
        producer: ProducerIdentity,
        partitions: &[(String, u32)],
        groups: &[String],
        wait: EnrolWait,
    ) -> Result<(), ResponseError> {
        let journal = host.coordinating(id).await?;
        let lock = self.states.lock(id);
        let _held = lock.acquire().await;
        let current = self.states.get(id)?;
        let next = state::add(
            current.as_ref(),
            producer.id.0,
            producer.epoch.0,
            partitions,
            groups,
            host.now_ms(),
        )?;
        if let Some(next) = next {
            match wait {
                EnrolWait::Durable => self.states.persist(id, &next, journal.as_ref()).await?,
                EnrolWait::Appended => {
                    // Its durability comes with the batches' (or it is durable).
                    drop(
                        self.states
                            .persist_ahead(id, &next, journal.as_ref())
                            .await?,
                    );
                }
            }
            if current.is_none_or(|c| c.state != TxnState::Ongoing) {
                self.metrics.begun();
            }
        }
        Ok(())
    }

    /// EndTxn at `id`'s coordinator: the outcome is decided durably (a Prepare state)
    /// and answered, as Kafka's coordinator answers once the Prepare state is logged;
    /// a task then writes the markers and completes the transaction, holding the id's
    /// lock until it is done, so the producer's next change of the id waits for the
    /// markers where Kafka's coordinator would refuse it with CONCURRENT_TRANSACTIONS
    /// to be retried. When every marker goes to a partition of this shard, the
    /// decision is appended ahead of them and the answer waits for both: one group
    /// commit round. Markers that cannot all be written now are left to
    /// [`housekeeping`](Self::housekeeping). Returns the producer the producer's next
    /// transaction uses (a new epoch in V2, and a new id once the epochs ran out).
    pub async fn end<H: TxnHost + 'static>(
        self: &Rc<Self>,
        host: &Rc<H>,
        id: &str,
        producer: ProducerIdentity,
        commit: bool,
        protocol: TxnProtocol,
    ) -> Result<ProducerIdentity, ResponseError> {
        let journal = host.coordinating(id).await?;
        let held = self.states.lock(id).acquire_owned().await;
        let current = self.states.get(id)?;
        let (producer_id, epoch) = (producer.id.0, producer.epoch.0);
        let next_of = |meta: &TxnMetadata| {
            let (id, epoch) = state::next_producer(meta);
            ProducerIdentity::new(id, epoch)
        };
        match state::end(
            current.as_ref(),
            producer_id,
            epoch,
            commit,
            protocol,
            host.now_ms(),
        )? {
            EndOutcome::AlreadyDone => Ok(current.as_ref().map_or(producer, next_of)),
            EndOutcome::Prepare(mut prepared) => {
                if state::needs_next_producer_id(&prepared) {
                    let fresh = host.allocate_producer_id().await?;
                    prepared = state::with_next_producer_id(prepared, fresh);
                }
                let next = next_of(&prepared);
                if let Some(targets) = self.markers_here(&**host, &prepared) {
                    // The decision is made durable by the round that makes its markers
                    // durable (or one before), and a read_committed reader sees the
                    // transaction only once its marker is durable.
                    let ahead = self
                        .states
                        .persist_ahead(id, &prepared, journal.as_ref())
                        .await?;
                    // A failure leaves the Prepare state for the background pass.
                    let _ = self
                        .finish_at(&**host, id, &prepared, journal.as_ref(), targets)
                        .await;
                    StateManager::durable(id, ahead).await?;
                    failure_probe::reached(Probe::TxnPrepared);
                    return Ok(next);
                }
                self.states.persist(id, &prepared, journal.as_ref()).await?;
                failure_probe::reached(Probe::TxnPrepared);
                let (me, host, id) = (Rc::clone(self), Rc::clone(host), id.to_string());
                glommio::spawn_local(async move {
                    let _held = held;
                    // A failure leaves the Prepare state for the background pass.
                    let _ = me.finish(&*host, &id, &prepared, journal.as_ref()).await;
                })
                .detach();
                Ok(next)
            }
        }
    }

    /// Writes the markers of `meta` (a Prepare state, durable) and, once every one is
    /// written, makes the transaction complete. Call it holding the id's lock. On
    /// failure the Prepare state stays and the background pass tries again.
    pub async fn finish(
        &self,
        host: &impl TxnHost,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
    ) -> Result<TxnMetadata, ResponseError> {
        let targets = host.marker_targets(meta).map_err(|reason| {
            tracing::info!(id, reason, "transaction markers wait");
            ResponseError::CoordinatorNotAvailable
        })?;
        self.finish_at(host, id, meta, journal, targets).await
    }

    /// `meta`'s marker targets when this shard writes every one of them itself, into
    /// the group commit its state log shares: a single host, no group's offsets in the
    /// transaction, and every partition led here.
    fn markers_here(
        &self,
        host: &impl TxnHost,
        meta: &TxnMetadata,
    ) -> Option<Vec<(i32, MarkerTarget)>> {
        if !self.states.logs_here() || !meta.groups.is_empty() {
            return None;
        }
        host.marker_targets(meta)
            .ok()
            .filter(|targets| targets.iter().all(|(node, _)| *node == host.node()))
    }

    /// [`finish`](Self::finish) with `meta`'s marker targets found.
    async fn finish_at(
        &self,
        host: &impl TxnHost,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
        targets: Vec<(i32, MarkerTarget)>,
    ) -> Result<TxnMetadata, ResponseError> {
        let end = Marker {
            producer: ProducerIdentity::new(meta.producer_id, meta.producer_epoch),
            commit: meta.state == TxnState::PrepareCommit,
            coordinator_epoch: CoordinatorEpoch(journal.map_or(0, |j| j.epoch)),
            ends: if meta.markers_bump_epoch {
                MarkerEnds::BeforeItsEpoch
            } else {
                MarkerEnds::AtItsEpoch
            },
        };
        let node = host.node();
        let (here, there): (Vec<_>, Vec<_>) = targets.into_iter().partition(|(n, _)| *n == node);
        let here: Vec<(String, u32)> = here.into_iter().flat_map(|(_, t)| t.partitions).collect();
        let there: Vec<MarkerTarget> = there.into_iter().map(|(_, t)| t).collect();
        let (marked, sent) = futures_util::future::join(
            host.write_markers_here(end, &here),
            host.send_markers(end, &there),
        )
        .await;
        if let Err(e) = marked.and(sent) {
            tracing::info!(id, error = %e, "transaction markers not written yet");
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        failure_probe::reached(Probe::TxnMarked);
        let Some(done) = state::complete(meta, host.now_ms()) else {
            return Ok(meta.clone());
        };
        self.states.persist_eventually(id, &done, journal).await?;
        if end.commit {
            self.metrics.committed();
        } else {
            self.metrics.aborted();
        }
        Ok(done)
    }

    /// One background pass: finishes every transaction this shard coordinates that is
    /// in a Prepare state, aborts (at the next epoch) every one open past its timeout,
    /// and forgets every transactional id idle past the expiration.
    pub async fn housekeeping(&self, host: &impl TxnHost) {
        host.catch_up().await;
        let mut open = 0u64;
        let mut oldest_ms = 0i64;
        let now = host.now_ms();
        let expiration_ms = self.limits.id_expiration.as_millis() as i64;
        for (id, stored) in self.states.all() {
            if !host.coordinates(&id) {
                continue;
            }
            if stored.state == TxnState::Ongoing {
                open += 1;
                oldest_ms = oldest_ms.max(now - stored.started_ms);
            }
            if state::id_expired(&stored, now, expiration_ms) {
                self.forget(host, &id, expiration_ms).await;
                continue;
            }
            let due = stored.state.is_preparing() || state::expire(&stored, now).is_some();
            if due {
                self.finish_or_expire(host, &id).await;
            }
        }
        self.metrics.set_open(open, oldest_ms.max(0) as u64);
        self.states.checkpoint_if_due().await;
    }

    /// Finishes `id`'s transaction when it is (still, once its lock is held) in a
    /// Prepare state, or aborts it at the next epoch when it is open past its timeout.
    async fn finish_or_expire(&self, host: &impl TxnHost, id: &str) {
        let Some((_held, journal, meta)) = self.locked(host, id).await else {
            return;
        };
        let preparing = if meta.state.is_preparing() {
            meta
        } else if let Some(fenced) = state::expire(&meta, host.now_ms()) {
            tracing::info!(
                id,
                producer_id = meta.producer_id,
                "transaction timed out: aborting it"
            );
            if self
                .states
                .persist(id, &fenced, journal.as_ref())
                .await
                .is_err()
            {
                return;
            }
            self.metrics.expired();
            fenced
        } else {
            return;
        };
        // A failure leaves the Prepare state for the next pass.
        let _ = self.finish(host, id, &preparing, journal.as_ref()).await;
    }

    /// `id`'s lock, journal and state, for a background step: None when this shard no
    /// longer coordinates `id` or it has no readable state once the lock is held.
    async fn locked(
        &self,
        host: &impl TxnHost,
        id: &str,
    ) -> Option<(HeldKey, Option<Journal>, TxnMetadata)> {
        let held = self.states.lock(id).acquire_owned().await;
        let journal = host.coordinating(id).await.ok()?;
        let meta = self.states.get(id).ok()??;
        Some((held, journal, meta))
    }

    /// Forgets `id` if it is still expired once its lock is held (a request may have
    /// used it meanwhile).
    async fn forget(&self, host: &impl TxnHost, id: &str, expiration_ms: i64) {
        let Some((_held, journal, meta)) = self.locked(host, id).await else {
            return;
        };
        if state::id_expired(&meta, host.now_ms(), expiration_ms)
            && self.states.forget(id, journal.as_ref()).await.is_ok()
        {
            tracing::info!(
                id,
                producer_id = meta.producer_id,
                "transactional id expired: forgotten"
            );
        }
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
