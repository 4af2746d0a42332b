//! The transaction coordinator's view of the shard: a transactional id is coordinated
//! where a group of that name would be (same table, same journal partitions); a
//! transaction's markers go to the leaders of its partitions and to the coordinators of
//! its groups; and transactions are finished — right after EndTxn, and in the
//! background for those a request could not finish, those a takeover inherited in a
//! Prepare state, and those open past their timeout.

use std::{
    rc::Rc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use kafka_protocol::ResponseError;

use super::context::ShardContext;
use crate::{
    failure_probe::{self, Probe},
    group::journal::Journal,
    metadata::{cluster_state::OFFSETS_TOPIC, placement::coordinator_slot},
    storage::partition_log::MarkerEnds,
    txn::{
        coordinator::TxnCoordinator,
        enrol,
        markers::{self, MarkerTarget, TxnEnd},
        state::{self, TxnMetadata, TxnProtocol, TxnState},
    },
};

/// What an enrolment's caller needs of the open state before it goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnrolWait {
    /// Durable: the client is answered and may write anywhere next, or what follows
    /// is not in a partition log (offsets pending in a group).
    Durable,
    /// Appended: the caller appends the transaction's batches to partitions of this
    /// shard next, which a single host's group commit makes durable only with it
    /// (`TxnCoordinator::persist_ahead`).
    Appended,
}

/// How often a shard looks for transactions to finish or expire.
pub const TXN_HOUSEKEEPING_INTERVAL: Duration = Duration::from_millis(500);

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl ShardContext {
    /// The nodes that write `meta`'s markers, each with its partitions; `Err` names a
    /// partition or group nobody leads or coordinates right now.
    fn marker_targets(&self, meta: &TxnMetadata) -> Result<Vec<(i32, MarkerTarget)>, String> {
        let mut by_node: Vec<(i32, MarkerTarget)> = Vec::new();
        let mut add = |node: i32, topic: &str, partition: u32| -> Result<(), String> {
            match by_node.iter_mut().find(|(n, _)| *n == node) {
                Some((_, t)) => t.partitions.push((topic.to_string(), partition)),
                None => {
                    let addr = self
                        .node_addr(node)
                        .ok_or_else(|| format!("node {node} has no address"))?;
                    by_node.push((
                        node,
                        MarkerTarget {
                            addr,
                            partitions: vec![(topic.to_string(), partition)],
                        },
                    ));
                }
            }
            Ok(())
        };
        let snapshot = self.metadata();
        let table = &snapshot.view.coordinators;
        for (topic, p) in &meta.partitions {
            // A journal partition a V2 group coordinator enrolled stands for the groups
            // of its coordinator slot (a single host has the slots but no journal).
            let leader = if topic == OFFSETS_TOPIC {
                table.get(*p as usize).copied()
            } else {
                self.partition_state(topic, *p).and_then(|s| s.leader)
            }
            .ok_or_else(|| format!("{topic}-{p} has no leader"))?;
            add(leader, topic, *p)?;
        }
        for group in &meta.groups {
            let slot = coordinator_slot(group, table.len());
            let node = *table
                .get(slot)
                .ok_or_else(|| format!("group {group} has no coordinator"))?;
            add(node, OFFSETS_TOPIC, slot as u32)?;
        }
        Ok(by_node)
    }

    /// `meta`'s marker targets when this shard writes every one of them itself, into
    /// the group commit its state log shares: a single host, no group's offsets in the
    /// transaction, and every partition led here.
    fn markers_here(&self, meta: &TxnMetadata) -> Option<Vec<(i32, MarkerTarget)>> {
        if !self.txns.logs_here() || !meta.groups.is_empty() {
            return None;
        }
        self.marker_targets(meta)
            .ok()
            .filter(|targets| targets.iter().all(|(node, _)| *node == self.node))
    }

    /// Writes `end`'s markers to `targets`: those of this shard's own node here, with
    /// no request (a single host's whole transaction), the others' with a
    /// WriteTxnMarkers request to each node, all at once.
    async fn write_markers_to(
        &self,
        end: TxnEnd,
        targets: Vec<(i32, MarkerTarget)>,
    ) -> Result<(), String> {
        let (here, there): (Vec<_>, Vec<_>) = targets
            .into_iter()
            .partition(|(node, _)| *node == self.node);
        let here: Vec<(String, u32)> = here.into_iter().flat_map(|(_, t)| t.partitions).collect();
        let there: Vec<MarkerTarget> = there.into_iter().map(|(_, t)| t).collect();
        let (marked, sent) = futures_util::future::join(
            self.write_markers(end, here.iter().map(|(t, p)| (t.as_str(), *p as i32))),
            markers::write(self.txns.peers(), end, &there),
        )
        .await;
        if let Some(((topic, p), e)) = here
            .iter()
            .zip(marked)
            .find_map(|(tp, r)| r.err().map(|e| (tp, e)))
        {
            return Err(format!("marker for {topic}-{p} here: {e:?}"));
        }
        sent.map_err(|e| e.to_string())
    }

    /// Writes the markers of `meta` (a Prepare state, durable) and, once every one is
    /// written, makes the transaction complete. Call it holding the id's lock. On
    /// failure the Prepare state stays and the background pass tries again.
    pub async fn finish_txn(
        &self,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
    ) -> Result<TxnMetadata, ResponseError> {
        let targets = self.marker_targets(meta).map_err(|reason| {
            tracing::info!(id, reason, "transaction markers wait");
            ResponseError::CoordinatorNotAvailable
        })?;
        self.finish_txn_at(id, meta, journal, targets).await
    }

    /// [`finish_txn`](Self::finish_txn) with `meta`'s marker targets found.
    async fn finish_txn_at(
        &self,
        id: &str,
        meta: &TxnMetadata,
        journal: Option<&Journal>,
        targets: Vec<(i32, MarkerTarget)>,
    ) -> Result<TxnMetadata, ResponseError> {
        let end = TxnEnd {
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            commit: meta.state == TxnState::PrepareCommit,
            coordinator_epoch: journal.map_or(0, |j| j.epoch),
            ends: if meta.markers_bump_epoch {
                MarkerEnds::BeforeItsEpoch
            } else {
                MarkerEnds::AtItsEpoch
            },
        };
        if let Err(e) = self.write_markers_to(end, targets).await {
            tracing::info!(id, error = %e, "transaction markers not written yet");
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        failure_probe::reached(Probe::TxnMarked);
        let Some(done) = state::complete(meta, now_ms()) else {
            return Ok(meta.clone());
        };
        self.txns.persist_eventually(id, &done, journal).await?;
        if end.commit {
            self.metrics.transactions.committed();
        } else {
            self.metrics.transactions.aborted();
        }
        Ok(done)
    }

    /// AddPartitionsToTxn and AddOffsetsToTxn at `id`'s coordinator: adds `partitions`
    /// and `groups` to the open transaction (opening one), durably or, as `wait` says,
    /// ahead of the batches its caller appends on this shard.
    pub async fn add_to_txn(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, u32)],
        groups: &[String],
        wait: EnrolWait,
    ) -> Result<(), ResponseError> {
        let journal = self.coordinating(id).await?;
        let lock = self.txns.lock(id);
        let _held = lock.acquire().await;
        let current = self.txns.get(id)?;
        let next = state::add(
            current.as_ref(),
            producer_id,
            epoch,
            partitions,
            groups,
            now_ms(),
        )?;
        if let Some(next) = next {
            match wait {
                EnrolWait::Durable => self.txns.persist(id, &next, journal.as_ref()).await?,
                EnrolWait::Appended => {
                    // Its durability comes with the batches' (or it is durable).
                    drop(self.txns.persist_ahead(id, &next, journal.as_ref()).await?);
                }
            }
            if current.is_none_or(|c| c.state != TxnState::Ongoing) {
                self.metrics.transactions.begun();
            }
        }
        Ok(())
    }

    /// Adds `partitions` and `groups` to `id`'s transaction wherever it is
    /// coordinated: here, or at its coordinator's host (the brokers' AddPartitionsToTxn,
    /// each group as its journal partition). Transactions V2's implicit enrolment, by
    /// the leader of `partitions` (whose batches follow on this shard) or the
    /// coordinator of `groups`.
    pub async fn enrol_in_txn(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, u32)],
        groups: &[String],
    ) -> Result<(), ResponseError> {
        self.resync().await;
        if self.owns_group(id) {
            // Pending offsets go to LMDB, not into this shard's group commit.
            let wait = if groups.is_empty() {
                EnrolWait::Appended
            } else {
                EnrolWait::Durable
            };
            return self
                .add_to_txn(id, producer_id, epoch, partitions, groups, wait)
                .await;
        }
        let snapshot = self.metadata();
        let table = &snapshot.view.coordinators;
        let addr = table
            .get(coordinator_slot(id, table.len()))
            .and_then(|node| self.node_addr(*node))
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let mut all = partitions.to_vec();
        all.extend(groups.iter().map(|g| {
            (
                OFFSETS_TOPIC.to_string(),
                coordinator_slot(g, table.len()) as u32,
            )
        }));
        enrol::add_remotely(self.txns.peers(), &addr, id, producer_id, epoch, &all).await
    }

    /// EndTxn at `id`'s coordinator: the outcome is decided durably (a Prepare state)
    /// and answered, as Kafka's coordinator answers once the Prepare state is logged;
    /// a task then writes the markers and completes the transaction, holding the id's
    /// lock until it is done, so the producer's next change of the id (enrolling its
    /// next transaction, in V1 or V2) waits for the markers where Kafka's coordinator
    /// would refuse it with CONCURRENT_TRANSACTIONS to be retried. Markers that cannot
    /// all be written now are left to the background pass. Returns the producer id and
    /// epoch the producer's next transaction uses (a new epoch in V2, and a new id once
    /// the epochs ran out).
    pub async fn end_txn(
        self: &Rc<Self>,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        protocol: TxnProtocol,
    ) -> Result<(i64, i16), ResponseError> {
        let journal = self.coordinating(id).await?;
        let held = self.txns.lock(id).acquire_owned().await;
        let current = self.txns.get(id)?;
        match state::end(
            current.as_ref(),
            producer_id,
            epoch,
            commit,
            protocol,
            now_ms(),
        )? {
            state::EndOutcome::AlreadyDone => Ok(current
                .as_ref()
                .map_or((producer_id, epoch), state::next_producer)),
            state::EndOutcome::Prepare(mut prepared) => {
                if state::needs_next_producer_id(&prepared) {
                    let fresh = self.producer_ids.allocate().await.map_err(|e| {
                        tracing::error!(error = %e, "cannot allocate a producer id");
                        ResponseError::UnknownServerError
                    })?;
                    prepared = state::with_next_producer_id(prepared, fresh);
                }
                let next = state::next_producer(&prepared);
                if let Some(targets) = self.markers_here(&prepared) {
                    // Every marker goes to a partition of this shard: the decision is
                    // appended ahead of them and made durable by the round that makes
                    // them durable (or one before), and a read_committed reader sees
                    // the transaction only once its marker is durable. One round where
                    // deciding and then marking took two; answered when both are done.
                    let ahead = self
                        .txns
                        .persist_ahead(id, &prepared, journal.as_ref())
                        .await?;
                    // A failure leaves the Prepare state for the background pass.
                    let _ = self
                        .finish_txn_at(id, &prepared, journal.as_ref(), targets)
                        .await;
                    TxnCoordinator::durable(id, ahead).await?;
                    failure_probe::reached(Probe::TxnPrepared);
                    return Ok(next);
                }
                self.txns.persist(id, &prepared, journal.as_ref()).await?;
                failure_probe::reached(Probe::TxnPrepared);
                let (ctx, id) = (Rc::clone(self), id.to_string());
                glommio::spawn_local(async move {
                    let _held = held;
                    // A failure leaves the Prepare state for the background pass.
                    let _ = ctx.finish_txn(&id, &prepared, journal.as_ref()).await;
                })
                .detach();
                Ok(next)
            }
        }
    }

    /// Forgets `id` if it is still expired once its lock is held (a request may have
    /// used it meanwhile).
    async fn forget_txn_id(&self, id: &str, expiration_ms: i64) {
        let lock = self.txns.lock(id);
        let _held = lock.acquire().await;
        let Ok(journal) = self.coordinating(id).await else {
            return;
        };
        let Ok(Some(meta)) = self.txns.get(id) else {
            return;
        };
        if state::id_expired(&meta, now_ms(), expiration_ms)
            && self.txns.forget(id, journal.as_ref()).await.is_ok()
        {
            tracing::info!(
                id,
                producer_id = meta.producer_id,
                "transactional id expired: forgotten"
            );
        }
    }

    /// One background pass: finishes every transaction this shard coordinates that is
    /// in a Prepare state, aborts (at the next epoch) every one open past its timeout,
    /// and forgets every transactional id idle past the expiration.
    pub async fn txn_housekeeping(&self) {
        self.resync().await;
        let mut open = 0u64;
        let mut oldest_ms = 0i64;
        let now = now_ms();
        let expiration_ms = self.config.transactions.id_expiration.as_millis() as i64;
        for (id, stored) in self.txns.all() {
            if !self.owns_group(&id) {
                continue;
            }
            if stored.state == TxnState::Ongoing {
                open += 1;
                oldest_ms = oldest_ms.max(now - stored.started_ms);
            }
            if state::id_expired(&stored, now, expiration_ms) {
                self.forget_txn_id(&id, expiration_ms).await;
                continue;
            }
            let due = stored.state.is_preparing() || state::expire(&stored, now).is_some();
            if !due {
                continue;
            }
            let lock = self.txns.lock(&id);
            let _held = lock.acquire().await;
            let Ok(journal) = self.coordinating(&id).await else {
                continue;
            };
            let Ok(Some(meta)) = self.txns.get(&id) else {
                continue;
            };
            let preparing = if meta.state.is_preparing() {
                meta
            } else if let Some(fenced) = state::expire(&meta, now_ms()) {
                tracing::info!(
                    id,
                    producer_id = meta.producer_id,
                    "transaction timed out: aborting it"
                );
                if self
                    .txns
                    .persist(&id, &fenced, journal.as_ref())
                    .await
                    .is_err()
                {
                    continue;
                }
                self.metrics.transactions.expired();
                fenced
            } else {
                continue;
            };
            // A failure leaves the Prepare state for the next pass.
            let _ = self.finish_txn(&id, &preparing, journal.as_ref()).await;
        }
        self.metrics
            .transactions
            .set_open(open, oldest_ms.max(0) as u64);
        self.txns.checkpoint_if_due().await;
    }
}
