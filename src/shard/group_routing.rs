//! Which groups this shard coordinates, and where it journals their commits: the
//! group coordinator's view of the shard.

use kafka_protocol::ResponseError;

use super::context::ShardContext;
use crate::metadata::partition_error::PartitionError;
use crate::{
    group::{journal::Journal, journal_snapshot},
    metadata::{
        cluster_state::OFFSETS_TOPIC,
        placement::{coordinator_slot, NodeId},
    },
};

impl ShardContext {
    /// True when this shard coordinates `group`. Reads the registry's table when the
    /// shard has not caught up with it yet, so a group's first request after the table
    /// was filled is not turned away.
    pub fn owns_group(&self, group: &str) -> bool {
        let slot = self.with_coordinators(|table| coordinator_slot(group, table.len()));
        self.coordinates_slot(slot as u32)
    }

    /// True when this shard coordinates the groups of coordinator slot `slot`: the slot
    /// is this shard's in the coordinator table and, on a cluster, the shard leads the
    /// slot's offsets journal partition and has applied it (leading it is not enough
    /// until its commits are applied here: a transaction marker that found no offsets
    /// pending before then would end nothing and still be answered done).
    pub fn coordinates_slot(&self, slot: u32) -> bool {
        let coordinates =
            self.with_coordinators(|table| table.get(slot as usize) == Some(&self.node));
        coordinates && (!self.view.has_journal() || self.replication.journal_ready(slot))
    }

    /// Runs `f` on the coordinator table: the registry's while the shard has not caught
    /// up with it, the shard's view's otherwise.
    fn with_coordinators<R>(&self, f: impl FnOnce(&[NodeId]) -> R) -> R {
        if self.registry.version() != self.view.version() {
            f(&self.registry.cluster().coordinators)
        } else {
            f(&self.view.snapshot().view.coordinators)
        }
    }

    /// The journal to change `group`'s offsets through when this shard coordinates it
    /// (`None` on a single host, which has none), or NOT_COORDINATOR.
    pub async fn coordinating(&self, group: &str) -> Result<Option<Journal>, ResponseError> {
        self.resync().await;
        if !self.owns_group(group) {
            return Err(ResponseError::NotCoordinator);
        }
        self.offsets_journal(group)
            .await
            .map_err(|_| ResponseError::NotCoordinator)
    }

    /// Where this coordinator journals `group`'s commits: its journal partition, which
    /// this shard leads. `Ok(None)` without a journal (a single host); `Err` when this
    /// shard does not lead that partition.
    pub async fn offsets_journal(&self, group: &str) -> Result<Option<Journal>, PartitionError> {
        self.resync().await;
        let Some(slot) = self.view.journal_slot(group) else {
            // A cluster's coordinators always journal (the journal is created with the
            // coordinator table); only a single host commits to LMDB alone.
            return match self.config.cluster {
                Some(_) => Err(PartitionError::NotOwner),
                None => Ok(None),
            };
        };
        let log = self.partition(OFFSETS_TOPIC, slot as i32).await?;
        let epoch = self
            .leadership(OFFSETS_TOPIC, slot)
            .ok_or(PartitionError::NotOwner)?
            .epoch;
        let gate = self
            .replication
            .journal_gate(slot)
            .ok_or(PartitionError::NotOwner)?;
        Ok(Some(Journal { log, epoch, gate }))
    }

    /// Which groups and transactional ids offsets journal partition `p` holds, when
    /// there is a journal.
    pub fn journal_names(&self, p: u32) -> Option<impl Fn(&str) -> bool + Send + 'static> {
        self.view.journal_names(p)
    }

    /// Snapshots every offsets journal partition this shard leads that has grown twice
    /// past its live state (see `group::journal_snapshot`).
    pub async fn snapshot_journals(&self) {
        for (p, gate) in self.replication.ready_journals() {
            let Some(log) = self.open_log_of(OFFSETS_TOPIC, p) else {
                continue;
            };
            if !journal_snapshot::due(&log, &gate) {
                continue;
            }
            let (Some(leading), Some(names)) =
                (self.leadership(OFFSETS_TOPIC, p), self.journal_names(p))
            else {
                continue;
            };
            let journal = Journal {
                log,
                epoch: leading.epoch,
                gate,
            };
            match journal_snapshot::snapshot(&journal, self.coordinator.store(), names).await {
                Ok(r) => tracing::info!(
                    partition = p,
                    records = r.records,
                    snapshot_bytes = r.bytes,
                    log_bytes_before = r.log_bytes_before,
                    log_start = %r.log_start,
                    "offsets journal snapshot written"
                ),
                Err(e) => {
                    tracing::warn!(partition = p, error = %e, "offsets journal snapshot failed")
                }
            }
        }
    }
}
