//! What one shard owns: its storage, the partition logs placed on it, and its view of
//! the topic registry. `!Send`: lives on its shard's executor only.

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, HashMap},
    rc::Rc,
    sync::Arc,
    time::{Duration, Instant},
};

use glommio::sync::Semaphore;
use kafka_protocol::ResponseError;

use crate::{
    config::BrokerConfig,
    group::{coordinator::Coordinator, journal::Journal, offset_store::OffsetStore},
    metadata::{
        cluster_state::OFFSETS_TOPIC,
        partition_state::PartitionState,
        placement::{coordinator_slot, node_id, NodeId, ShardId},
        producer_ids::ProducerIds,
        registry::{ClusterView, RegistryError, TopicInfo, TopicRegistry},
        topic_config, topic_name,
    },
    metrics::{BrokerMetrics, ShardMetrics},
    replication::{lag_report::ReplicaLags, Replication},
    storage::{
        partition_log::{claim_dir, cut_log, Claim, Truncation},
        Clock, LogConfig, PartitionLog, ShardStorage, ShardStorageConfig, StorageError,
    },
};

/// Why a partition cannot be served here (`api::error_code` says what Kafka error it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionError {
    /// No such topic or partition.
    Unknown,
    /// Another shard owns it; the client must refresh metadata.
    NotOwner,
    /// Its log could not be opened or is failing.
    Storage,
}

type PartitionKey = (String, u32);

/// How a produce to a topic is taken: see [`ShardContext::produce_rules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceRules {
    /// The largest record batch accepted (`max.message.bytes`).
    pub message_max_bytes: usize,
    /// Batches are stamped with the broker's time (`message.timestamp.type=LogAppendTime`).
    pub log_append_time: bool,
    /// Every record needs a key: the topic is compacted.
    pub keys_required: bool,
}

/// A topic as the data path needs it: its id, partition count, replicas and leaders,
/// and produce rules.
#[derive(Debug, Clone)]
struct TopicShape {
    id: [u8; 16],
    partitions: u32,
    states: Rc<[PartitionState]>,
    message_max_bytes: usize,
    log_append_time: bool,
    keys_required: bool,
    min_insync: usize,
}

/// This shard's leadership of a partition, as of its last look at the metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    /// The epoch it leads in; stamped into every batch it appends.
    pub epoch: i32,
    /// Replicas in sync now.
    pub isr: usize,
    /// Replicas of the partition.
    pub replicas: usize,
    /// The topic's `min.insync.replicas`.
    pub min_insync: usize,
}

/// The metadata as of a shard's last look at the registry: what Metadata,
/// FindCoordinator and DescribeCluster answer from, without taking the registry's lock
/// (which every shard shares).
#[derive(Debug)]
pub struct MetadataSnapshot {
    /// The hosts, coordinators and controller.
    pub view: ClusterView,
    /// Every topic, by name.
    pub topics: BTreeMap<String, TopicInfo>,
}

/// A shard's open logs: topic name → partition → (topic id, log). Looked up by `&str`,
/// so the data path allocates no key.
type OpenLogs = HashMap<String, HashMap<u32, ([u8; 16], PartitionLog)>>;

/// Shortest time between two attempts to reopen a fenced partition.
const REOPEN_INTERVAL: Duration = Duration::from_secs(1);

/// How often a shard deletes segments past retention. Often, so each pass retires about
/// the one segment per partition that a roll made surplus: a pass every 10 s retired a
/// dozen at once at 300 MB/s, and the directory syncs and index deletions in a row
/// stalled rolls behind them (p99.9 spikes on a 10 s cadence). Kafka checks every 5
/// minutes, which lets a fast partition overshoot its retention.bytes by minutes of
/// writes; a pass costs a few comparisons per open partition.
pub const RETENTION_CHECK_INTERVAL: Duration = Duration::from_secs(1);

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
    /// This shard's copy of the registry, refreshed when its version changes, so the
    /// data path never takes the registry's broker-wide lock.
    topics: RefCell<HashMap<String, TopicShape>>,
    /// The metadata as of the last look at the registry.
    snapshot: RefCell<Rc<MetadataSnapshot>>,
    logs: RefCell<OpenLogs>,
    reopen_attempts: RefCell<HashMap<PartitionKey, Instant>>,
    seen_version: Cell<u64>,
    sync_lock: Semaphore,
}

impl ShardContext {
    /// Starts the shard's storage and its background resync of the registry.
    pub async fn start(
        id: ShardId,
        config: Arc<BrokerConfig>,
        registry: Arc<TopicRegistry>,
        producer_ids: Arc<ProducerIds>,
        offsets: Arc<OffsetStore>,
        metrics: Arc<BrokerMetrics>,
        lags: Arc<ReplicaLags>,
    ) -> Result<Rc<ShardContext>, StorageError> {
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
        .await?;
        let inflight_kib = config.inflight_bytes_max.div_ceil(1024) as u64;
        let ctx = Rc::new(ShardContext {
            id,
            node: node_id(config.node_id, id),
            config,
            registry,
            producer_ids,
            lags,
            coordinator: {
                let c = Coordinator::new(offsets);
                glommio::spawn_local(Coordinator::run_timers(Rc::downgrade(&c))).detach();
                c
            },
            storage,
            inflight: Rc::new(Semaphore::new(inflight_kib)),
            topics: RefCell::new(HashMap::new()),
            snapshot: RefCell::new(Rc::new(MetadataSnapshot {
                view: ClusterView {
                    cluster_id: String::new(),
                    hosts: BTreeMap::new(),
                    coordinators: Vec::new(),
                    controller: None,
                    acls: Default::default(),
                },
                topics: BTreeMap::new(),
            })),
            logs: RefCell::new(HashMap::new()),
            reopen_attempts: RefCell::new(HashMap::new()),
            seen_version: Cell::new(0),
            sync_lock: Semaphore::new(1),
            metrics,
            replication: Replication::default(),
        });
        ctx.resync().await;
        ctx.open_owned_partitions().await;
        glommio::spawn_local(Self::enforce_retention(Rc::downgrade(&ctx))).detach();
        let weak = Rc::downgrade(&ctx);
        glommio::spawn_local(async move {
            // Idle shards notice deleted topics within this period.
            while let Some(ctx) = weak.upgrade() {
                ctx.resync().await;
                drop(ctx);
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
        })
        .detach();
        Ok(ctx)
    }

    /// Closes every partition (making everything appended durable and sealing the
    /// active segments) and stops the flush loop. Appends still arriving afterwards fail.
    pub async fn shut_down(&self) {
        let logs = self.open_logs();
        self.logs.borrow_mut().clear();
        for ((topic, p), log) in logs {
            if let Err(e) = log.close().await {
                tracing::error!(topic = %topic, partition = p, error = %e, "closing partition failed");
            }
        }
        self.storage.shutdown().await;
        tracing::info!(shard = self.id.0, "shard stopped");
    }

    async fn open_owned_partitions(&self) {
        for topic in self.metadata().topics.values() {
            for (p, state) in topic.states.iter().enumerate() {
                if state.replicas.contains(&self.node) {
                    if let Err(e) = self.replica(&topic.name, p as u32).await {
                        tracing::error!(topic = %topic.name, partition = p, error = ?e, "cannot open partition");
                    }
                }
            }
        }
    }

    /// True when this shard leads partition `p` of `topic` (as of its last look at the
    /// registry).
    pub fn owns(&self, topic: &str, p: u32) -> bool {
        self.leadership(topic, p).is_some()
    }

    /// Partition `p` of `topic`'s state, as of this shard's last look at the registry.
    pub fn partition_state(&self, topic: &str, p: u32) -> Option<PartitionState> {
        self.topics
            .borrow()
            .get(topic)?
            .states
            .get(p as usize)
            .cloned()
    }

    /// This shard's leadership of partition `p` of `topic`, when it leads it.
    pub fn leadership(&self, topic: &str, p: u32) -> Option<Leadership> {
        let topics = self.topics.borrow();
        let shape = topics.get(topic)?;
        let state = shape.states.get(p as usize)?;
        (state.leader == Some(self.node)).then_some(Leadership {
            epoch: state.leader_epoch,
            isr: state.isr.len(),
            replicas: state.replicas.len(),
            min_insync: shape.min_insync,
        })
    }

    /// KiB of unanswered request bytes the shard holds now (its in-flight budget in use).
    pub fn inflight_kib_held(&self) -> u64 {
        let capacity = self.config.inflight_bytes_max.div_ceil(1024) as u64;
        capacity.saturating_sub(self.inflight.available())
    }

    /// How a produce to `topic` is taken, from its configs as of this shard's last look at
    /// the registry (the broker's settings for a topic it does not know).
    pub fn produce_rules(&self, topic: &str) -> ProduceRules {
        self.topics.borrow().get(topic).map_or(
            ProduceRules {
                message_max_bytes: self.config.message_max_bytes,
                log_append_time: false,
                keys_required: false,
            },
            |t| ProduceRules {
                message_max_bytes: t.message_max_bytes,
                log_append_time: t.log_append_time,
                keys_required: t.keys_required,
            },
        )
    }

    /// True when this shard coordinates `group`. Reads the registry's table when the
    /// shard has not caught up with it yet, so a group's first request after the table
    /// was filled is not turned away.
    pub fn owns_group(&self, group: &str) -> bool {
        let owns =
            |table: &[NodeId]| table.get(coordinator_slot(group, table.len())) == Some(&self.node);
        let coordinates = if self.registry.version() != self.seen_version.get() {
            owns(&self.registry.cluster().coordinators)
        } else {
            owns(&self.snapshot.borrow().view.coordinators)
        };
        // Leading the group's journal partition is not enough until its commits are
        // applied here.
        coordinates
            && self
                .journal_slot(group)
                .is_none_or(|p| self.replication.journal_ready(p))
    }

    /// The offsets journal partition of `group`, once the cluster has the journal.
    fn journal_slot(&self, group: &str) -> Option<u32> {
        let topics = self.topics.borrow();
        let journal = topics.get(OFFSETS_TOPIC)?;
        Some(coordinator_slot(group, journal.partitions as usize) as u32)
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
        let Some(slot) = self.journal_slot(group) else {
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
        Ok(Some(Journal { log, epoch }))
    }

    /// The registry version this shard last looked at.
    pub fn metadata_version(&self) -> u64 {
        self.seen_version.get()
    }

    /// The metadata as of this shard's last look at the registry (call
    /// [`resync`](Self::resync) first to be current).
    pub fn metadata(&self) -> Rc<MetadataSnapshot> {
        Rc::clone(&self.snapshot.borrow())
    }

    /// Refreshes this shard's copy of the registry and drops the logs of topics that
    /// were deleted (or deleted and recreated) since the last look, deleting their data.
    /// Cheap when nothing changed: one atomic load.
    pub async fn resync(&self) {
        let version = self.registry.version();
        if version == self.seen_version.get() {
            return;
        }
        let Ok(_permit) = self.sync_lock.acquire_permit(1).await else {
            return;
        };
        let listed = self.registry.list();
        let topics: HashMap<String, TopicShape> = listed
            .iter()
            .map(|t| {
                let shape = TopicShape {
                    id: t.id,
                    partitions: t.partitions,
                    states: t.states.iter().cloned().collect(),
                    message_max_bytes: topic_config::message_max_bytes(
                        self.config.message_max_bytes,
                        &t.configs,
                    ),
                    log_append_time: topic_config::log_append_time(&t.configs),
                    keys_required: topic_config::compacted(&t.configs),
                    min_insync: topic_config::min_insync_replicas(
                        &t.configs,
                        t.replication_factor(),
                    ),
                };
                (t.name.clone(), shape)
            })
            .collect();
        let log_configs: HashMap<&str, LogConfig> = listed
            .iter()
            .map(|t| {
                let config = topic_config::log_config(&self.config.log, &t.configs);
                (t.name.as_str(), config)
            })
            .collect();
        let stale: Vec<(PartitionKey, PartitionLog)> = {
            let mut logs = self.logs.borrow_mut();
            let mut stale = Vec::new();
            logs.retain(|name, parts| {
                let topic = topics.get(name);
                parts.retain(|p, (id, log)| {
                    // Gone with its topic, or a replica moved elsewhere.
                    let keep = topic.is_some_and(|t| {
                        t.id == *id
                            && t.states
                                .get(*p as usize)
                                .is_none_or(|s| s.replicas.contains(&self.node))
                    });
                    if !keep {
                        stale.push(((name.clone(), *p), log.clone()));
                    }
                    keep
                });
                !parts.is_empty()
            });
            stale
        };
        *self.topics.borrow_mut() = topics;
        *self.snapshot.borrow_mut() = Rc::new(MetadataSnapshot {
            view: self.registry.cluster(),
            topics: listed.iter().map(|t| (t.name.clone(), t.clone())).collect(),
        });
        // Altered topic configs reach the partitions already open.
        for ((topic, p), log) in self.open_logs() {
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
        self.seen_version.set(version);
    }

    /// Every [`RETENTION_CHECK_INTERVAL`], deletes the segments each open partition
    /// keeps past its retention (time and size); stops when the shard is gone.
    async fn enforce_retention(weak: std::rc::Weak<ShardContext>) {
        loop {
            glommio::timer::sleep(RETENTION_CHECK_INTERVAL).await;
            let Some(ctx) = weak.upgrade() else {
                return;
            };
            let logs = ctx.open_logs();
            drop(ctx);
            for ((topic, p), log) in logs {
                // Thousands of partitions: a pass gives way to requests in between.
                glommio::yield_if_needed().await;
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

    /// Calls `f` with every open partition log of the shard, its topic and partition,
    /// without copying the shard's list (`f` must not open or close logs).
    pub(super) fn for_each_log(&self, mut f: impl FnMut(&str, u32, &PartitionLog)) {
        for (topic, parts) in self.logs.borrow().iter() {
            for (p, (_, log)) in parts {
                f(topic, *p, log);
            }
        }
    }

    /// Every open partition log of the shard, with its topic and partition.
    pub(super) fn open_logs(&self) -> Vec<(PartitionKey, PartitionLog)> {
        self.logs
            .borrow()
            .iter()
            .flat_map(|(topic, parts)| {
                parts
                    .iter()
                    .map(move |(p, (_, log))| ((topic.clone(), *p), log.clone()))
            })
            .collect()
    }

    /// The log of partition `p` of `topic` when this shard has it open.
    pub fn open_log_of(&self, topic: &str, p: u32) -> Option<PartitionLog> {
        self.logs
            .borrow()
            .get(topic)
            .and_then(|parts| parts.get(&p))
            .map(|(_, log)| log.clone())
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
        let (topic_id, replicated) = {
            let topics = self.topics.borrow();
            let info = topics.get(topic).ok_or(PartitionError::Unknown)?;
            if p >= info.partitions {
                return Err(PartitionError::Unknown);
            }
            match info.states.get(p as usize) {
                Some(state) if serves(state, self.node) => (info.id, state.replicas.len() > 1),
                _ => return Err(PartitionError::NotOwner),
            }
        };
        let cached = self.open_log_of(topic, p);
        match cached {
            Some(log) if log.fenced().is_none() => return Ok(log),
            Some(log) => {
                // A failed write or fdatasync fenced this log. Reopening re-reads what
                // reached the disk, so a full disk recovers once space is freed; tried
                // at most once per REOPEN_INTERVAL so a failing disk is not hammered.
                let key = (topic.to_string(), p);
                let now = Instant::now();
                let due = self
                    .reopen_attempts
                    .borrow()
                    .get(&key)
                    .is_none_or(|t| now >= *t + REOPEN_INTERVAL);
                if !due {
                    return Ok(log);
                }
                self.reopen_attempts.borrow_mut().insert(key, now);
                tracing::warn!(topic, partition = p, reason = ?log.fenced(), "reopening a fenced partition");
                if let Some(parts) = self.logs.borrow_mut().get_mut(topic) {
                    parts.remove(&p);
                }
                if let Err(e) = log.close().await {
                    tracing::error!(topic, partition = p, error = %e, "closing a fenced partition failed");
                }
            }
            None => {}
        }
        let _permit = self
            .sync_lock
            .acquire_permit(1)
            .await
            .map_err(|_| PartitionError::Storage)?;
        if let Some(log) = self.open_log_of(topic, p) {
            return Ok(log);
        }
        let dir = self.config.data_dir.join(format!("{topic}-{p}"));
        let config = self.registry.get(topic).map_or_else(
            || self.config.log.clone(),
            |t| topic_config::log_config(&self.config.log, &t.configs),
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
                self.logs
                    .borrow_mut()
                    .entry(topic.to_string())
                    .or_default()
                    .insert(p, (topic_id, log.clone()));
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
            let _permit = self
                .sync_lock
                .acquire_permit(1)
                .await
                .map_err(|_| PartitionError::Storage)?;
            let log = self
                .logs
                .borrow_mut()
                .get_mut(topic)
                .and_then(|parts| parts.remove(&p))
                .map(|(_, log)| log);
            let Some(log) = log else {
                return Err(PartitionError::Storage);
            };
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
