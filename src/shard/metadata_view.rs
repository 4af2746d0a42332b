//! A shard's copy of the topic registry: what the data path reads (partition states,
//! leadership, produce rules) and what Metadata answers from, refreshed when the
//! registry's version changes so no request takes the registry's broker-wide lock.

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, HashMap},
    rc::Rc,
};

use crate::semaphore::{Permit, Semaphore};

use crate::metadata::{
    cluster_state::OFFSETS_TOPIC,
    partition_state::PartitionState,
    placement::{coordinator_slot, NodeId},
    registry::{ClusterView, TopicInfo},
    topic_config,
};

/// How a produce to a topic is taken: see [`MetadataView::produce_rules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceRules {
    /// The largest record batch accepted (`max.message.bytes`).
    pub message_max_bytes: usize,
    /// Batches are stamped with the broker's time (`message.timestamp.type=LogAppendTime`).
    pub log_append_time: bool,
    /// Every record needs a key: the topic is compacted.
    pub keys_required: bool,
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
/// FindCoordinator and DescribeCluster answer from.
#[derive(Debug)]
pub struct MetadataSnapshot {
    /// The hosts, coordinators and controller.
    pub view: ClusterView,
    /// Every topic, by name.
    pub topics: BTreeMap<String, TopicInfo>,
}

/// A topic as the data path needs it: its id, partition count, replicas and leaders,
/// and produce rules.
#[derive(Debug, Clone)]
pub(super) struct TopicShape {
    pub(super) id: [u8; 16],
    pub(super) partitions: u32,
    pub(super) states: Rc<[PartitionState]>,
    message_max_bytes: usize,
    log_append_time: bool,
    keys_required: bool,
    min_insync: usize,
}

impl TopicShape {
    /// The shape of `t`, its batch limit defaulting to `message_max_bytes`.
    pub(super) fn of(t: &TopicInfo, message_max_bytes: usize) -> TopicShape {
        TopicShape {
            id: t.id,
            partitions: t.partitions,
            states: t.states.iter().cloned().collect(),
            message_max_bytes: topic_config::message_max_bytes(message_max_bytes, &t.configs),
            log_append_time: topic_config::log_append_time(&t.configs),
            keys_required: topic_config::compacted(&t.configs),
            min_insync: topic_config::min_insync_replicas(&t.configs, t.replication_factor()),
        }
    }
}

/// One shard's view of the metadata. Its lock serializes refreshes only.
pub struct MetadataView {
    topics: RefCell<HashMap<String, TopicShape>>,
    snapshot: RefCell<Rc<MetadataSnapshot>>,
    version: Cell<u64>,
    refreshing: Semaphore,
}

impl Default for MetadataView {
    fn default() -> MetadataView {
        MetadataView {
            topics: RefCell::new(HashMap::new()),
            snapshot: RefCell::new(Rc::new(MetadataSnapshot {
                view: ClusterView {
                    cluster_id: String::new(),
                    hosts: BTreeMap::new(),
                    coordinators: Vec::new(),
                    controller: None,
                    acls: Default::default(),
                    throttles: Default::default(),
                },
                topics: BTreeMap::new(),
            })),
            version: Cell::new(0),
            refreshing: Semaphore::new(1),
        }
    }
}

impl MetadataView {
    /// The registry version installed last.
    pub fn version(&self) -> u64 {
        self.version.get()
    }

    /// The metadata installed last.
    pub fn snapshot(&self) -> Rc<MetadataSnapshot> {
        Rc::clone(&self.snapshot.borrow())
    }

    /// Waits until no other refresh runs; `None` when the shard is going away.
    pub(super) async fn refreshing(&self) -> Option<Permit<'_>> {
        self.refreshing.acquire_permit(1).await.ok()
    }

    /// Installs the `listed` topics, in the shapes `topics`, and the cluster `view`.
    /// The version is recorded apart, by [`caught_up`](Self::caught_up), once what the
    /// change retired is gone.
    pub(super) fn install(
        &self,
        topics: HashMap<String, TopicShape>,
        listed: &[TopicInfo],
        view: ClusterView,
    ) {
        *self.topics.borrow_mut() = topics;
        *self.snapshot.borrow_mut() = Rc::new(MetadataSnapshot {
            view,
            topics: listed.iter().map(|t| (t.name.clone(), t.clone())).collect(),
        });
    }

    /// Records that the shard is up to date with registry version `version`.
    pub(super) fn caught_up(&self, version: u64) {
        self.version.set(version);
    }

    /// Partition `p` of `topic`'s state.
    pub fn partition_state(&self, topic: &str, p: u32) -> Option<PartitionState> {
        self.topics
            .borrow()
            .get(topic)?
            .states
            .get(p as usize)
            .cloned()
    }

    /// `node`'s leadership of partition `p` of `topic`, when it leads it.
    pub fn leadership(&self, topic: &str, p: u32, node: NodeId) -> Option<Leadership> {
        let topics = self.topics.borrow();
        let shape = topics.get(topic)?;
        let state = shape.states.get(p as usize)?;
        (state.leader == Some(node)).then_some(Leadership {
            epoch: state.leader_epoch,
            isr: state.isr.len(),
            replicas: state.replicas.len(),
            min_insync: shape.min_insync,
        })
    }

    /// How a produce to `topic` is taken, from its configs (`message_max_bytes` and no
    /// other rule for a topic it does not know).
    pub fn produce_rules(&self, topic: &str, message_max_bytes: usize) -> ProduceRules {
        self.topics.borrow().get(topic).map_or(
            ProduceRules {
                message_max_bytes,
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

    /// The offsets journal partition of `group`, once the cluster has the journal.
    pub fn journal_slot(&self, group: &str) -> Option<u32> {
        let topics = self.topics.borrow();
        let journal = topics.get(OFFSETS_TOPIC)?;
        Some(coordinator_slot(group, journal.partitions as usize) as u32)
    }

    /// True on a cluster, whose coordinators journal their groups' commits to the
    /// offsets journal (a single host has none).
    pub fn has_journal(&self) -> bool {
        self.topics.borrow().contains_key(OFFSETS_TOPIC)
    }

    /// Which names (groups, transactional ids) offsets journal partition `p` holds, when
    /// there is a journal.
    pub fn journal_names(&self, p: u32) -> Option<impl Fn(&str) -> bool + Send + 'static> {
        let partitions = self.topics.borrow().get(OFFSETS_TOPIC)?.partitions as usize;
        Some(move |name: &str| coordinator_slot(name, partitions) as u32 == p)
    }

    /// Runs `f` on `topic`'s shape, if the topic is known.
    pub(super) fn with_topic<R>(&self, topic: &str, f: impl FnOnce(&TopicShape) -> R) -> Option<R> {
        self.topics.borrow().get(topic).map(f)
    }
}
