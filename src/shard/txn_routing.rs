//! The transaction coordinator's view of the shard, its [`TxnHost`]: a transactional
//! id is coordinated where a group of that name would be (same table, same journal
//! partitions); a transaction's markers go to the leaders of its partitions and to the
//! coordinators of its groups, written here for this shard's own and sent to other
//! nodes otherwise; and an enrolment by a partition's leader goes to the id's
//! coordinator, here or on another host. Every step of a transactional request is
//! `txn::coordinator`'s.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_protocol::ResponseError;

use super::context::ShardContext;
use crate::{
    group::journal::Journal,
    ids::ProducerIdentity,
    metadata::{cluster_state::OFFSETS_TOPIC, placement::coordinator_slot},
    storage::partition_log::Marker,
    txn::{
        coordinator::{EnrolWait, TxnHost},
        enrol,
        markers::{self, MarkerTarget},
        state::TxnMetadata,
    },
};

/// How often a shard looks for transactions to finish or expire.
pub const TXN_HOUSEKEEPING_INTERVAL: Duration = Duration::from_millis(500);

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl TxnHost for ShardContext {
    async fn coordinating(&self, id: &str) -> Result<Option<Journal>, ResponseError> {
        ShardContext::coordinating(self, id).await
    }

    async fn catch_up(&self) {
        self.resync().await;
    }

    fn coordinates(&self, id: &str) -> bool {
        self.owns_group(id)
    }

    fn node(&self) -> i32 {
        self.node
    }

    fn marker_targets(&self, meta: &TxnMetadata) -> Result<Vec<(i32, MarkerTarget)>, String> {
        self.marker_targets_of(meta)
    }

    async fn write_markers_here(
        &self,
        end: Marker,
        partitions: &[(String, u32)],
    ) -> Result<(), String> {
        let marked = self
            .write_markers(end, partitions.iter().map(|(t, p)| (t.as_str(), *p as i32)))
            .await;
        match partitions
            .iter()
            .zip(marked)
            .find_map(|(tp, r)| r.err().map(|e| (tp, e)))
        {
            Some(((topic, p), e)) => Err(format!("marker for {topic}-{p} here: {e:?}")),
            None => Ok(()),
        }
    }

    async fn send_markers(&self, end: Marker, targets: &[MarkerTarget]) -> Result<(), String> {
        markers::write(self.txns.states().peers(), end, targets)
            .await
            .map_err(|e| e.to_string())
    }

    async fn allocate_producer_id(&self) -> Result<i64, ResponseError> {
        self.producer_ids.allocate().await.map_err(|e| {
            tracing::error!(error = %e, "cannot allocate a producer id");
            ResponseError::UnknownServerError
        })
    }

    fn now_ms(&self) -> i64 {
        now_ms()
    }
}

impl ShardContext {
    /// The nodes that write `meta`'s markers, each with its partitions; `Err` names a
    /// partition or group nobody leads or coordinates right now.
    fn marker_targets_of(&self, meta: &TxnMetadata) -> Result<Vec<(i32, MarkerTarget)>, String> {
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

    /// Adds `partitions` and `groups` to `id`'s transaction wherever it is
    /// coordinated: here, or at its coordinator's host (the brokers' AddPartitionsToTxn,
    /// each group as its journal partition). Transactions V2's implicit enrolment, by
    /// the leader of `partitions` (whose batches follow on this shard) or the
    /// coordinator of `groups`.
    pub async fn enrol_in_txn(
        &self,
        id: &str,
        producer: ProducerIdentity,
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
                .txns
                .add(self, id, producer, partitions, groups, wait)
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
        enrol::add_remotely(
            self.txns.states().peers(),
            &addr,
            id,
            producer.id.0,
            producer.epoch.0,
            &all,
        )
        .await
    }
}
