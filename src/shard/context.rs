//! What one shard owns: its storage, the partition logs placed on it, and its view of
//! the topic registry. `!Send`: lives on its shard's executor only. Its parts live
//! beside it: the metadata view (`metadata_view`), the open-logs table (`open_logs`),
//! opening and cutting logs (`partitions`), group routing (`group_routing`) and the
//! background tasks (`tasks`).

use std::{collections::HashMap, rc::Rc, sync::Arc, time::Duration};

use super::{
    metadata_view::{Leadership, MetadataSnapshot, MetadataView, ProduceRules, TopicShape},
    open_logs::{OpenLogs, PartitionKey},
    tasks::Tasks,
};
use crate::{
    config::BrokerConfig,
    group::{coordinator::Coordinator, offset_store::OffsetStore},
    metadata::{
        cluster_state::OFFSETS_TOPIC,
        partition_state::PartitionState,
        placement::{node_id, NodeId, ShardId},
        producer_ids::ProducerIds,
        registry::{RegistryError, TopicInfo, TopicRegistry},
        topic_name,
    },
    metrics::{BrokerMetrics, ShardMetrics},
    replication::{lag_report::ReplicaLags, Replication},
    semaphore::Semaphore,
    storage::{Clock, LogConfig, PartitionLog, ShardStorage, ShardStorageConfig, StorageError},
    txn::{
        coordinator::{Coordinator as TxnCoordinator, CoordinatorLimits},
        peer::Peers,
        state_log::StateLog,
        state_manager::StateManager,
    },
};

/// How often a shard deletes segments past retention. Often, so each pass retires about
/// the one segment per partition that a roll made surplus: a pass every 10 s retired a
/// dozen at once at 300 MB/s, and the directory syncs and index deletions in a row
/// stalled rolls behind them (p99.9 spikes on a 10 s cadence). Kafka checks every 5
/// minutes, which lets a fast partition overshoot its retention.bytes by minutes of
/// writes; a pass costs a few comparisons per open partition.
pub const RETENTION_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Why a shard could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Its storage could not start or open its partitions.
    #[error(transparent)]
    Storage(StorageError),
    /// Its transaction-state log could not be opened.
    #[error("transaction-state log: {0}")]
    TxnStateLog(crate::group::journal::JournalError),
}

/// One shard's state.
pub struct ShardContext {
    /// This shard.
    pub id: ShardId,
    /// This shard's Kafka node id (`host node id × 1024 + shard`).
    pub node: NodeId,
    /// The broker's configuration.
    pub config: Arc<BrokerConfig>,
    /// The topic registry shared by all shards.
    pub registry: Arc<TopicRegistry>,
    /// The broker's producer id allocator.
    pub producer_ids: Arc<ProducerIds>,
    /// This shard's consumer-group coordinator.
    pub coordinator: Rc<Coordinator>,
    /// This shard's transaction coordinator.
    pub txns: Rc<TxnCoordinator>,
    /// This shard's storage.
    pub storage: ShardStorage,
    /// Request bytes read but not yet answered, in KiB: the shard's back-pressure.
    pub inflight: Rc<Semaphore>,
    /// Where this shard reports the lag of the followers of what it leads (for
    /// `weir cluster status`).
    pub lags: Arc<ReplicaLags>,
    /// This shard's metrics.
    pub metrics: ShardMetrics,
    /// The partitions this shard leads or follows as a replica.
    pub replication: Replication,
    /// The shard's background tasks, stopped before its logs close.
    pub tasks: Tasks,
    /// This shard's copy of the registry, refreshed when its version changes, so the
    /// data path never takes the registry's broker-wide lock.
    pub(super) view: MetadataView,
    /// The partition logs open on this shard.
    pub(super) logs: OpenLogs,
}

impl ShardContext {
    /// Starts the shard's storage and opens the partitions placed on it; its background
    /// tasks are started apart (`shard::background`).
    pub async fn start(
        id: ShardId,
        config: Arc<BrokerConfig>,
        registry: Arc<TopicRegistry>,
        producer_ids: Arc<ProducerIds>,
        offsets: Arc<OffsetStore>,
        metrics: Arc<BrokerMetrics>,
        lags: Arc<ReplicaLags>,
    ) -> Result<Rc<ShardContext>, StartError> {
        let metrics = ShardMetrics::new(metrics, id.0);
        let storage = ShardStorage::start(
            ShardStorageConfig {
                data_dir: config.data_dir.join(format!("shard-{}", id.0)),
                flush: config.flush_config(),
                cache_bytes_max: config.cache_bytes_max,
                metrics: metrics.storage.clone(),
                recycle: config.recycle,
            },
            Clock::System,
        )
        .await
        .map_err(StartError::Storage)?;
        // A single host logs its transaction states in each shard (a new log: what the
        // last one held was applied to LMDB before the shards started); a cluster host
        // in its journal partitions.
        let state_log = match config.cluster {
            Some(_) => None,
            None => Some(
                StateLog::open(&storage)
                    .await
                    .map_err(StartError::TxnStateLog)?,
            ),
        };
        let inflight_kib = config.inflight_bytes_max.div_ceil(1024) as u64;
        let peers = Peers::new(config.peer_dialer());
        let limits = CoordinatorLimits {
            timeout_max: config.transactions.timeout_max,
            id_expiration: config.transactions.id_expiration,
        };
        let ctx = Rc::new(ShardContext {
            id,
            node: node_id(config.node_id, id),
            config,
            registry,
            producer_ids,
            lags,
            txns: Rc::new(TxnCoordinator::new(
                StateManager::new(Arc::clone(&offsets), peers, state_log),
                metrics.transactions.clone(),
                limits,
            )),
            coordinator: Coordinator::new(offsets),
            storage,
            inflight: Rc::new(Semaphore::new(inflight_kib)),
            view: MetadataView::default(),
            logs: OpenLogs::default(),
            metrics,
            replication: Replication::default(),
            tasks: Tasks::default(),
        });
        ctx.resync().await;
        ctx.open_placed_partitions().await;
        Ok(ctx)
    }

    /// Stops the background tasks, closes every partition (making everything appended
    /// durable and sealing the active segments) and stops the flush loop. Appends still
    /// arriving afterwards fail.
    pub async fn shut_down(&self) {
        self.tasks.stop().await;
        for ((topic, p), log) in self.logs.take_all() {
            if let Err(e) = log.close().await {
                tracing::error!(topic = %topic, partition = p, error = %e, "closing partition failed");
            }
        }
        self.txns.states().close().await;
        self.storage.shutdown().await;
        tracing::info!(shard = self.id.0, "shard stopped");
    }

    /// True when this shard leads partition `p` of `topic` (as of its last look at the
    /// registry).
    pub fn owns(&self, topic: &str, p: u32) -> bool {
        self.leadership(topic, p).is_some()
    }

    /// Partition `p` of `topic`'s state, as of this shard's last look at the registry.
    pub fn partition_state(&self, topic: &str, p: u32) -> Option<PartitionState> {
        self.view.partition_state(topic, p)
    }

    /// This shard's leadership of partition `p` of `topic`, when it leads it.
    pub fn leadership(&self, topic: &str, p: u32) -> Option<Leadership> {
        self.view.leadership(topic, p, self.node)
    }

    /// KiB of unanswered request bytes the shard holds now (its in-flight budget in use).
    pub fn inflight_kib_held(&self) -> u64 {
        let capacity = self.config.inflight_bytes_max.div_ceil(1024) as u64;
        capacity.saturating_sub(self.inflight.available())
    }

    /// How a produce to `topic` is taken, from its configs as of this shard's last look at
    /// the registry (the broker's settings for a topic it does not know).
    pub fn produce_rules(&self, topic: &str) -> ProduceRules {
        self.view
            .produce_rules(topic, self.config.message_max_bytes)
    }

    /// The registry version this shard last looked at.
    pub fn metadata_version(&self) -> u64 {
        self.view.version()
    }

    /// The metadata as of this shard's last look at the registry (call
    /// [`resync`](Self::resync) first to be current).
    pub fn metadata(&self) -> Rc<MetadataSnapshot> {
        self.view.snapshot()
    }

    /// Refreshes this shard's copy of the registry and drops the logs of topics that
    /// were deleted (or deleted and recreated) since the last look, deleting their data.
    /// Cheap when nothing changed: one atomic load. Returns once the logs the change
    /// retired are deleted.
    pub async fn resync(&self) {
        let version = self.registry.version();
        if version == self.view.version() {
            return;
        }
        let Some(_refreshing) = self.view.refreshing().await else {
            return;
        };
        let listed = self.registry.list();
        let topics: HashMap<String, TopicShape> = listed
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    TopicShape::of(t, self.config.message_max_bytes),
                )
            })
            .collect();
        let log_configs: HashMap<&str, LogConfig> = listed
            .iter()
            .map(|t| {
                let config = self.log_config_of(&t.name, &t.configs);
                (t.name.as_str(), config)
            })
            .collect();
        let Some(_changing) = self.logs.changing_dirs().await else {
            return;
        };
        let stale = self.logs.retain(|name, p, id| {
            // Gone with its topic, or a replica moved elsewhere.
            topics.get(name).is_some_and(|t| {
                t.id == id
                    && t.states
                        .get(p as usize)
                        .is_none_or(|s| s.replicas.contains(&self.node))
            })
        });
        self.view.install(topics, &listed, self.registry.cluster());
        // Altered topic configs reach the partitions already open.
        for ((topic, p), log) in self.logs.all() {
            match log_configs.get(topic.as_str()) {
                Some(config) if *config != log.config() => {
                    if let Err(e) = log.set_config(config.clone()) {
                        tracing::error!(topic = %topic, partition = p, error = %e, "cannot apply topic configs");
                    }
                }
                _ => {}
            }
        }
        for ((topic, p), log) in stale {
            tracing::info!(topic = %topic, partition = p, "deleting a partition this shard no longer holds (topic deleted or replica moved)");
            if let Err(e) = log.delete().await {
                tracing::error!(topic = %topic, partition = p, error = %e, "cannot delete partition data");
            }
        }
        self.view.caught_up(version);
    }

    /// Calls `f` with every open partition log of the shard, its topic and partition,
    /// without copying the shard's list (`f` must not open or close logs).
    pub(super) fn for_each_log(&self, f: impl FnMut(&str, u32, &PartitionLog)) {
        self.logs.for_each(f);
    }

    /// Every open partition log of the shard, with its topic and partition.
    pub(super) fn open_logs(&self) -> Vec<(PartitionKey, PartitionLog)> {
        self.logs.all()
    }

    /// The log of partition `p` of `topic` when this shard has it open.
    pub fn open_log_of(&self, topic: &str, p: u32) -> Option<PartitionLog> {
        self.logs.get(topic, p)
    }

    /// The topic called `name`, creating it with the default partition count when
    /// auto-creation is on and the name is legal.
    pub async fn topic_or_create(&self, name: &str) -> Option<TopicInfo> {
        self.resync().await;
        if let Some(t) = self.metadata().topics.get(name) {
            return Some(t.clone());
        }
        if !self.config.auto_create_topics || topic_name::validate(name).is_err() {
            return None;
        }
        if name == OFFSETS_TOPIC {
            // Made as the coordinators' journal, as Kafka makes it for a Metadata
            // request; a single host has none.
            self.config.cluster.as_ref()?;
            if let Err(e) = self.registry.coordinators().await {
                tracing::warn!(error = %e, "cannot create the offsets journal");
            }
            return self.registry.get(name);
        }
        match self
            .registry
            .create(
                name,
                self.config.default_partitions,
                self.config.default_replication_factor(),
                Default::default(),
            )
            .await
        {
            Ok(t) => {
                tracing::info!(
                    topic = name,
                    partitions = t.partitions,
                    "auto-created topic"
                );
                Some(t)
            }
            Err(RegistryError::AlreadyExists(_)) => self.registry.get(name),
            Err(e) => {
                tracing::error!(topic = name, error = %e, "cannot auto-create topic");
                None
            }
        }
    }
}
