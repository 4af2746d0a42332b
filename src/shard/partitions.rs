//! Opening a shard's partition logs (those placed on it once the metadata says so, and
//! any on first use, as leader or replica), reopening a fenced one, cutting a follower's
//! diverged tail, and the retention pass.

use std::time::Instant;

use super::context::ShardContext;
use crate::metadata::partition_error::PartitionError;
use crate::{
    metadata::{
        cluster_state::OFFSETS_TOPIC,
        partition_state::PartitionState,
        placement::NodeId,
        topic_config::{self, TopicConfigs},
    },
    storage::{
        partition_log::{claim_dir, cut_log, Claim, Truncation},
        CleanupPolicy, LogConfig, PartitionLog,
    },
};

impl ShardContext {
    /// The log settings of `topic`'s partitions: the broker's with the topic's
    /// overrides, except that the offsets journal is never cut by retention nor
    /// compacted by key — its records hold whole requests and LMDB's state is rebuilt
    /// from them, so only its own snapshots shorten it (`group::journal_snapshot`).
    pub(super) fn log_config_of(&self, topic: &str, configs: &TopicConfigs) -> LogConfig {
        let mut c = topic_config::log_config(&self.config.log, configs);
        if topic == OFFSETS_TOPIC {
            c.retention_age_max = None;
            c.retention_bytes_max = None;
            c.cleanup = CleanupPolicy::Delete;
        }
        c
    }

    /// Opens the partitions the metadata places on this shard that are not open yet — a
    /// topic just created, a replica just assigned — as Kafka does when a broker becomes a
    /// partition's leader or follower, so a first produce does not wait for its log's
    /// files: each new log costs its directory, files and syncs, and a thousand of them
    /// opened on first use held up the first produces for ~10 s. A partition that is
    /// gone or moved by the time its turn comes is skipped.
    pub(super) async fn open_placed_partitions(&self) {
        let placed: Vec<(String, u32)> = self
            .metadata()
            .topics
            .values()
            .flat_map(|topic| {
                topic
                    .states
                    .iter()
                    .enumerate()
                    .filter(|(_, state)| state.replicas.contains(&self.node))
                    .map(|(p, _)| (topic.name.clone(), p as u32))
            })
            .filter(|(topic, p)| self.logs.get(topic, *p).is_none())
            .collect();
        for (topic, p) in placed {
            match self.replica(&topic, p).await {
                Ok(_) | Err(PartitionError::Unknown | PartitionError::NotOwner) => {}
                Err(e) => {
                    tracing::error!(topic = %topic, partition = p, error = ?e, "cannot open partition")
                }
            }
        }
    }

    /// The log of partition `p` of `topic`, which this shard leads, opened on first use.
    /// Fails with the Kafka error the client should see.
    pub async fn partition(&self, topic: &str, p: i32) -> Result<PartitionLog, PartitionError> {
        self.resync().await;
        let p = u32::try_from(p).map_err(|_| PartitionError::Unknown)?;
        self.open_replica(topic, p, |state, node| state.leader == Some(node))
            .await
    }

    /// The log of partition `p` of `topic` when this shard holds a replica of it (leader
    /// or follower), opened on first use.
    pub async fn replica(&self, topic: &str, p: u32) -> Result<PartitionLog, PartitionError> {
        self.open_replica(topic, p, |state, node| state.replicas.contains(&node))
            .await
    }

    async fn open_replica(
        &self,
        topic: &str,
        p: u32,
        serves: impl Fn(&PartitionState, NodeId) -> bool,
    ) -> Result<PartitionLog, PartitionError> {
        let (topic_id, replicated) = self
            .view
            .with_topic(topic, |info| {
                if p >= info.partitions {
                    return Err(PartitionError::Unknown);
                }
                match info.states.get(p as usize) {
                    Some(state) if serves(state, self.node) => {
                        Ok((info.id, state.replicas.len() > 1))
                    }
                    _ => Err(PartitionError::NotOwner),
                }
            })
            .ok_or(PartitionError::Unknown)??;
        match self.logs.get(topic, p) {
            Some(log) if log.fenced().is_none() => return Ok(log),
            Some(log) => {
                // A failed write or fdatasync fenced this log. Reopening re-reads what
                // reached the disk, so a full disk recovers once space is freed.
                if !self.logs.reopen_due(topic, p, Instant::now()) {
                    return Ok(log);
                }
                tracing::warn!(topic, partition = p, reason = ?log.fenced(), "reopening a fenced partition");
                self.logs.remove(topic, p);
                if let Err(e) = log.close().await {
                    tracing::error!(topic, partition = p, error = %e, "closing a fenced partition failed");
                }
            }
            None => {}
        }
        let _changing = self
            .logs
            .changing_dirs()
            .await
            .ok_or(PartitionError::Storage)?;
        if let Some(log) = self.logs.get(topic, p) {
            return Ok(log);
        }
        let dir = self.config.data_dir.join(format!("{topic}-{p}"));
        let config = self.registry.get(topic).map_or_else(
            || self.config.log.clone(),
            |t| self.log_config_of(topic, &t.configs),
        );
        match claim_dir(&dir, topic_id).await {
            Ok(Claim::Ours) => {}
            Ok(Claim::Replaced) => {
                tracing::warn!(topic, partition = p, "deleted the records of an earlier topic of the same name found in this partition's directory");
            }
            Err(e) => {
                tracing::error!(topic, partition = p, error = %e, "cannot claim the partition's directory");
                return Err(PartitionError::Storage);
            }
        }
        match self.storage.open_log(&dir, config).await {
            Ok((log, reports)) => {
                for r in reports
                    .iter()
                    .filter(|r| r.truncated_bytes > 0 || r.index_rebuilt)
                {
                    tracing::warn!(topic, partition = p, report = ?r, "repaired partition on open");
                }
                if replicated {
                    // Until replication takes the partition up (its leader's view of
                    // the followers, or a follower's leader), nothing more counts as
                    // committed: an acks=all produce served in between waits.
                    log.set_commit_cap(log.high_watermark());
                }
                self.logs.insert(topic, p, topic_id, log.clone());
                Ok(log)
            }
            Err(e) => {
                tracing::error!(topic, partition = p, error = %e, "cannot open partition");
                Err(PartitionError::Storage)
            }
        }
    }

    /// Truncates this follower's log of partition `p` of `topic` as `how` says (its tail
    /// diverged from the leader's, or the leader's log starts past its end): closes the
    /// log, cuts its files, and opens it again.
    pub async fn cut_replica(
        &self,
        topic: &str,
        p: u32,
        how: Truncation,
    ) -> Result<PartitionLog, PartitionError> {
        {
            let _changing = self
                .logs
                .changing_dirs()
                .await
                .ok_or(PartitionError::Storage)?;
            let log = self.logs.remove(topic, p).ok_or(PartitionError::Storage)?;
            let dir = log.dir().to_path_buf();
            let cut = async {
                log.close().await?;
                cut_log(&dir, how).await
            };
            if let Err(e) = cut.await {
                tracing::error!(topic, partition = p, error = %e, ?how, "cannot truncate a replica");
                return Err(PartitionError::Storage);
            }
        }
        let log = self.replica(topic, p).await?;
        if let Err(e) = log.checkpoint_epochs().await {
            tracing::warn!(topic, partition = p, error = %e, "cannot write the leader epochs after a cut");
        }
        Ok(log)
    }

    /// Deletes the segments each open partition keeps past its retention (time and
    /// size), and forgets the idempotent producers silent past their expiration (and
    /// the marker epochs the groups keep for them): one pass, run every `RETENTION_CHECK_INTERVAL` by the shard's tasks.
    pub(super) async fn enforce_retention(&self) {
        let producer_expiration = self.config.transactions.producer_id_expiration;
        let forgotten = self.coordinator.forget_marker_epochs(producer_expiration);
        if forgotten > 0 {
            tracing::debug!(
                producers = forgotten,
                "forgot idle producers' marker epochs"
            );
        }
        for ((topic, p), log) in self.logs.all() {
            // Thousands of partitions: a pass gives way to requests in between.
            glommio::yield_if_needed().await;
            let forgotten = log.expire_producers(producer_expiration);
            if forgotten > 0 {
                tracing::debug!(topic = %topic, partition = p, producers = forgotten, "forgot idle producers");
            }
            match log.enforce_retention().await {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(topic = %topic, partition = p, segments = n, "deleted segments past retention")
                }
                Err(e) => {
                    tracing::warn!(topic = %topic, partition = p, error = %e, "retention failed")
                }
            }
        }
    }
}
