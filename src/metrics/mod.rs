//! What the broker says about itself while it runs: Prometheus metrics, served with the
//! health and readiness checks by [`http`].
//!
//! Every family is created once at start ([`BrokerMetrics::new`]) and registered in one
//! registry that only the metrics thread reads. Each shard takes its own handles out of
//! the families ([`ShardMetrics`], labelled `shard`): on the request path a shard touches
//! only its own counters (uncontended atomics no other core writes), and a scrape reads
//! them all. Per-topic counters are looked up once per topic and shard, then kept.
//! Partition offsets and other shard-local state are published by each shard once a
//! second ([`ShardMetrics::publish_partition`]), so a scrape never waits for a shard.

pub mod group_offsets;
pub mod http;
pub mod storage_metrics;

use std::{
    cell::{Cell, RefCell},
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

pub use storage_metrics::StorageMetrics;

use crate::group::offset_store::OffsetStore;

/// A shard's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShardLabel {
    /// The shard index.
    pub shard: u32,
}

/// A shard and a Kafka API.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    /// The shard index.
    pub shard: u32,
    /// The API's name, as Kafka spells it (`Produce`, `Fetch`, …).
    pub api: String,
}

/// A shard, an API and the Kafka error a partition got.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// The shard index.
    pub shard: u32,
    /// The API's name.
    pub api: String,
    /// Kafka's name for the error (`NotLeaderOrFollower`, …).
    pub error: String,
}

/// A shard and why it closed a connection.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// The shard index.
    pub shard: u32,
    /// Why (`frame`, `request`, `idle`, `stalled`, `socket`).
    pub reason: String,
}

/// A shard and a topic.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TopicLabels {
    /// The shard index.
    pub shard: u32,
    /// The topic.
    pub topic: String,
}

/// A shard and a consumer group.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    /// The shard index (the group's coordinator).
    pub shard: u32,
    /// The group.
    pub group: String,
}

/// A shard, a consumer group and one of its states.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupStateLabels {
    /// The shard index (the group's coordinator).
    pub shard: u32,
    /// The group.
    pub group: String,
    /// Kafka's name for the state (`Stable`, `PreparingRebalance`, …).
    pub state: String,
}

/// A shard and a partition.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartitionLabels {
    /// The shard index.
    pub shard: u32,
    /// The topic.
    pub topic: String,
    /// The partition index.
    pub partition: u32,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Kafka's names for a group's states, as `weir_group_state` labels them.
const GROUP_STATES: &[&str] = &[
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
];

fn latency_histogram() -> Histogram {
    // 50 µs to ~13 s: the fastest local request to the longest long poll.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        50e-6, 2.0, 19,
    ))
}

/// Every metric family of the broker, and the registry they are served from.
pub struct BrokerMetrics {
    registry: Registry,
    shards: usize,
    serving: AtomicUsize,
    requests: Family<ApiLabels, Counter>,
    request_latency: Histograms<ApiLabels>,
    errors: Family<ErrorLabels, Counter>,
    connections_accepted: Family<ShardLabel, Counter>,
    connections_closed: Family<ReasonLabels, Counter>,
    connections_open: Family<ShardLabel, Gauge>,
    inflight_bytes: Family<ShardLabel, Gauge>,
    records_in: Family<TopicLabels, Counter>,
    bytes_in: Family<TopicLabels, Counter>,
    bytes_out: Family<TopicLabels, Counter>,
    log_start: Family<PartitionLabels, Gauge>,
    high_watermark: Family<PartitionLabels, Gauge>,
    log_end: Family<PartitionLabels, Gauge>,
    log_bytes: Family<PartitionLabels, Gauge>,
    replicas: Family<PartitionLabels, Gauge>,
    in_sync_replicas: Family<PartitionLabels, Gauge>,
    replica_lag: Family<PartitionLabels, Gauge>,
    group_members: Family<GroupLabels, Gauge>,
    group_generation: Family<GroupLabels, Gauge>,
    group_state: Family<GroupStateLabels, Gauge>,
    high_watermarks: group_offsets::HighWatermarks,
    storage: storage_metrics::StorageFamilies,
}

impl BrokerMetrics {
    /// Creates and registers every family for a broker of `shards` shards.
    pub fn new(shards: usize, offsets: Arc<OffsetStore>) -> Arc<BrokerMetrics> {
        let mut registry = Registry::with_prefix("weir");
        let requests = Family::<ApiLabels, Counter>::default();
        registry.register(
            "kafka_requests",
            "Kafka requests decoded, by API",
            requests.clone(),
        );
        let request_latency: Histograms<ApiLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "kafka_request_latency",
            "Time from a request's decoding to its response being ready, by API (Produce: to the durable acknowledgement; Fetch: including the long poll)",
            prometheus_client::registry::Unit::Seconds,
            request_latency.clone(),
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "kafka_errors",
            "Kafka errors in responses, by API and error: a response's own, or one per topic, partition, group or member it answers for",
            errors.clone(),
        );
        let connections_accepted = Family::<ShardLabel, Counter>::default();
        registry.register(
            "connections_accepted",
            "Client connections accepted",
            connections_accepted.clone(),
        );
        let connections_closed = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "connections_closed",
            "Client connections closed, by reason (client: the client closed it)",
            connections_closed.clone(),
        );
        let connections_open = Family::<ShardLabel, Gauge>::default();
        registry.register(
            "connections_open",
            "Client connections open",
            connections_open.clone(),
        );
        let inflight_bytes = Family::<ShardLabel, Gauge>::default();
        registry.register_with_unit(
            "inflight_request",
            "Bytes of unanswered requests the shard holds (bounded by --inflight-bytes)",
            prometheus_client::registry::Unit::Bytes,
            inflight_bytes.clone(),
        );
        let records_in = Family::<TopicLabels, Counter>::default();
        registry.register(
            "records_produced",
            "Records appended by produce requests, by topic",
            records_in.clone(),
        );
        let bytes_in = Family::<TopicLabels, Counter>::default();
        registry.register_with_unit(
            "produced",
            "Record-batch bytes appended by produce requests, by topic",
            prometheus_client::registry::Unit::Bytes,
            bytes_in.clone(),
        );
        let bytes_out = Family::<TopicLabels, Counter>::default();
        registry.register_with_unit(
            "fetched",
            "Record-batch bytes returned by fetch requests, by topic",
            prometheus_client::registry::Unit::Bytes,
            bytes_out.clone(),
        );
        let log_start = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "partition_log_start_offset",
            "First offset still stored (published every second)",
            log_start.clone(),
        );
        let high_watermark = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "partition_high_watermark",
            "One past the last durable offset: what consumers can read (published every second)",
            high_watermark.clone(),
        );
        let log_end = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "partition_log_end_offset",
            "One past the last appended offset (published every second)",
            log_end.clone(),
        );
        let log_bytes = Family::<PartitionLabels, Gauge>::default();
        registry.register_with_unit(
            "partition_disk",
            "Bytes of the partition's segments (published every second)",
            prometheus_client::registry::Unit::Bytes,
            log_bytes.clone(),
        );
        let replicas = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "partition_replicas",
            "Replicas of the partition (published every second by each replica's shard)",
            replicas.clone(),
        );
        let in_sync_replicas = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "partition_in_sync_replicas",
            "Replicas in the partition's ISR; below weir_partition_replicas: under-replicated",
            in_sync_replicas.clone(),
        );
        let replica_lag = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "partition_replica_lag",
            "Offsets the slowest follower is behind the log end (on the leader's shard; 0 on followers)",
            replica_lag.clone(),
        );
        let group_members = Family::<GroupLabels, Gauge>::default();
        registry.register(
            "group_members",
            "Members of a consumer group, on its coordinator's shard (published every second)",
            group_members.clone(),
        );
        let group_generation = Family::<GroupLabels, Gauge>::default();
        registry.register(
            "group_generation",
            "A consumer group's generation (published every second)",
            group_generation.clone(),
        );
        let group_state = Family::<GroupStateLabels, Gauge>::default();
        registry.register(
            "group_state",
            "1 for a consumer group's current state (published every second)",
            group_state.clone(),
        );
        let high_watermarks = group_offsets::HighWatermarks::default();
        registry.register_collector(Box::new(group_offsets::GroupOffsets::new(
            offsets,
            Arc::clone(&high_watermarks),
        )));
        let storage = storage_metrics::StorageFamilies::register(&mut registry);
        Arc::new(BrokerMetrics {
            registry,
            shards,
            serving: AtomicUsize::new(0),
            requests,
            request_latency,
            errors,
            connections_accepted,
            connections_closed,
            connections_open,
            inflight_bytes,
            records_in,
            bytes_in,
            bytes_out,
            log_start,
            high_watermark,
            log_end,
            log_bytes,
            replicas,
            in_sync_replicas,
            replica_lag,
            group_members,
            group_generation,
            group_state,
            high_watermarks,
            storage,
        })
    }

    /// The registry, for the metrics thread to encode.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// A shard has recovered its storage and is accepting connections.
    pub fn shard_serving(&self) {
        self.serving.fetch_add(1, Ordering::Relaxed);
    }

    /// True once every shard is serving: `/ready`.
    pub fn ready(&self) -> bool {
        self.serving.load(Ordering::Relaxed) >= self.shards
    }
}

/// One shard's handles into the families. `!Send` (its per-topic cache is shard-local).
pub struct ShardMetrics {
    shard: u32,
    broker: Arc<BrokerMetrics>,
    /// Requests and latency by API, looked up once per API.
    apis: RefCell<HashMap<&'static str, (Counter, Histogram)>>,
    /// Errors by API and code, looked up once per pair.
    errors: RefCell<HashMap<(&'static str, i16), Counter>>,
    /// Closed connections by reason, looked up once per reason.
    closed: RefCell<HashMap<&'static str, Counter>>,
    /// Per-topic counters, looked up once per topic.
    topics: RefCell<HashMap<String, TopicCounters>>,
    /// Connections accepted.
    pub connections_accepted: Counter,
    /// Connections open.
    pub connections_open: Gauge,
    /// Unanswered request bytes held.
    pub inflight_bytes: Gauge,
    /// The storage engine's metrics of this shard.
    pub storage: StorageMetrics,
    /// When a connection closed for a protocol reason was last logged at info.
    last_protocol_log: Cell<Option<Instant>>,
}

struct TopicCounters {
    records_in: Counter,
    bytes_in: Counter,
    bytes_out: Counter,
}

impl ShardMetrics {
    /// Shard `shard`'s handles.
    pub fn new(broker: Arc<BrokerMetrics>, shard: usize) -> ShardMetrics {
        let label = ShardLabel {
            shard: shard as u32,
        };
        ShardMetrics {
            shard: shard as u32,
            apis: RefCell::new(HashMap::new()),
            errors: RefCell::new(HashMap::new()),
            closed: RefCell::new(HashMap::new()),
            topics: RefCell::new(HashMap::new()),
            connections_accepted: broker.connections_accepted.get_or_create_owned(&label),
            connections_open: broker.connections_open.get_or_create_owned(&label),
            inflight_bytes: broker.inflight_bytes.get_or_create_owned(&label),
            storage: broker.storage.for_shard(shard as u32),
            last_protocol_log: Cell::new(None),
            broker,
        }
    }

    /// True at most once a second: whether to log a connection closed for a protocol
    /// reason at info (every one is counted in `weir_connections_closed`).
    pub fn protocol_log_due(&self) -> bool {
        let now = Instant::now();
        let due = self
            .last_protocol_log
            .get()
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1));
        if due {
            self.last_protocol_log.set(Some(now));
        }
        due
    }

    /// The broker-wide metrics.
    pub fn broker(&self) -> &Arc<BrokerMetrics> {
        &self.broker
    }

    /// Counts a request of `api` that took `latency` from decoding to its response.
    pub fn request(&self, api: &'static str, latency: Duration) {
        let mut apis = self.apis.borrow_mut();
        let (count, histogram) = apis.entry(api).or_insert_with(|| {
            let labels = ApiLabels {
                shard: self.shard,
                api: api.to_string(),
            };
            (
                self.broker.requests.get_or_create_owned(&labels),
                self.broker.request_latency.get_or_create_owned(&labels),
            )
        });
        count.inc();
        histogram.observe(latency.as_secs_f64());
    }

    /// Counts Kafka error `code` (0 is skipped) in a response of `api`.
    pub fn error(&self, api: &'static str, code: i16) {
        if code == 0 {
            return;
        }
        let mut errors = self.errors.borrow_mut();
        let counter = match errors.entry((api, code)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                // A code Kafka does not define is not counted (no label to give it).
                let Some(error) = kafka_protocol::ResponseError::try_from_code(code) else {
                    return;
                };
                e.insert(self.broker.errors.get_or_create_owned(&ErrorLabels {
                    shard: self.shard,
                    api: api.to_string(),
                    error: format!("{error:?}"),
                }))
            }
        };
        counter.inc();
    }

    /// Counts a connection closed for `reason`.
    pub fn connection_closed(&self, reason: &'static str) {
        self.closed
            .borrow_mut()
            .entry(reason)
            .or_insert_with(|| {
                self.broker
                    .connections_closed
                    .get_or_create_owned(&ReasonLabels {
                        shard: self.shard,
                        reason: reason.to_string(),
                    })
            })
            .inc();
    }

    /// Runs `count` on `topic`'s counters, creating them on the topic's first use.
    fn with_topic(&self, topic: &str, count: impl FnOnce(&TopicCounters)) {
        if let Some(c) = self.topics.borrow().get(topic) {
            return count(c);
        }
        let labels = TopicLabels {
            shard: self.shard,
            topic: topic.to_string(),
        };
        let counters = TopicCounters {
            records_in: self.broker.records_in.get_or_create_owned(&labels),
            bytes_in: self.broker.bytes_in.get_or_create_owned(&labels),
            bytes_out: self.broker.bytes_out.get_or_create_owned(&labels),
        };
        count(&counters);
        self.topics.borrow_mut().insert(labels.topic, counters);
    }

    /// Counts `records` records in `bytes` bytes appended to `topic`.
    pub fn produced(&self, topic: &str, records: u64, bytes: u64) {
        self.with_topic(topic, |c| {
            c.records_in.inc_by(records);
            c.bytes_in.inc_by(bytes);
        });
    }

    /// Counts `bytes` bytes of `topic` returned by a fetch.
    pub fn fetched(&self, topic: &str, bytes: u64) {
        if bytes > 0 {
            self.with_topic(topic, |c| {
                c.bytes_out.inc_by(bytes);
            });
        }
    }

    /// A partition's gauges, to keep and [`PartitionGauges::set`] every publication;
    /// its high-watermark gauge is also what the lag collector reads.
    pub fn partition_gauges(&self, topic: &str, partition: u32) -> PartitionGauges {
        let labels = PartitionLabels {
            shard: self.shard,
            topic: topic.to_string(),
            partition,
        };
        let b = &self.broker;
        let gauges = PartitionGauges {
            log_start: b.log_start.get_or_create_owned(&labels),
            high_watermark: b.high_watermark.get_or_create_owned(&labels),
            log_end: b.log_end.get_or_create_owned(&labels),
            bytes: b.log_bytes.get_or_create_owned(&labels),
            replicas: b.replicas.get_or_create_owned(&labels),
            in_sync_replicas: b.in_sync_replicas.get_or_create_owned(&labels),
            replica_lag: b.replica_lag.get_or_create_owned(&labels),
        };
        if let Ok(mut hw) = b.high_watermarks.write() {
            hw.entry(labels.topic)
                .or_default()
                .insert(partition, gauges.high_watermark.clone());
        }
        gauges
    }

    /// Publishes a group this shard coordinates: its state, generation and members.
    pub fn publish_group(&self, group: &str, state: &'static str, generation: i32, members: usize) {
        let labels = GroupLabels {
            shard: self.shard,
            group: group.to_string(),
        };
        let b = &self.broker;
        b.group_members.get_or_create(&labels).set(members as i64);
        b.group_generation
            .get_or_create(&labels)
            .set(i64::from(generation));
        for s in GROUP_STATES {
            let l = GroupStateLabels {
                shard: self.shard,
                group: group.to_string(),
                state: s.to_string(),
            };
            b.group_state.get_or_create(&l).set(i64::from(*s == state));
        }
    }

    /// Stops publishing a group this shard no longer coordinates (deleted).
    pub fn forget_group(&self, group: &str) {
        let labels = GroupLabels {
            shard: self.shard,
            group: group.to_string(),
        };
        let b = &self.broker;
        b.group_members.remove(&labels);
        b.group_generation.remove(&labels);
        for s in GROUP_STATES {
            b.group_state.remove(&GroupStateLabels {
                shard: self.shard,
                group: group.to_string(),
                state: s.to_string(),
            });
        }
    }

    /// Drops this shard's per-topic counters of `topic` (it was deleted here), so its
    /// series leave the scrape instead of lingering until a restart.
    pub fn forget_topic(&self, topic: &str) {
        if self.topics.borrow_mut().remove(topic).is_none() {
            return;
        }
        let labels = TopicLabels {
            shard: self.shard,
            topic: topic.to_string(),
        };
        let b = &self.broker;
        for family in [&b.records_in, &b.bytes_in, &b.bytes_out] {
            family.remove(&labels);
        }
    }

    /// Stops publishing a partition that left this shard (its topic was deleted).
    pub fn forget_partition(&self, topic: &str, partition: u32) {
        let labels = PartitionLabels {
            shard: self.shard,
            topic: topic.to_string(),
            partition,
        };
        let b = &self.broker;
        for family in [
            &b.log_start,
            &b.high_watermark,
            &b.log_end,
            &b.log_bytes,
            &b.replicas,
            &b.in_sync_replicas,
            &b.replica_lag,
        ] {
            family.remove(&labels);
        }
        if let Ok(mut hw) = b.high_watermarks.write() {
            if let Some(parts) = hw.get_mut(topic) {
                parts.remove(&partition);
                if parts.is_empty() {
                    hw.remove(topic);
                }
            }
        }
    }
}

/// One partition's published gauges; see [`ShardMetrics::partition_gauges`].
pub struct PartitionGauges {
    log_start: Gauge,
    high_watermark: Gauge,
    log_end: Gauge,
    bytes: Gauge,
    replicas: Gauge,
    in_sync_replicas: Gauge,
    replica_lag: Gauge,
}

impl PartitionGauges {
    /// Publishes the partition's offsets and size.
    pub fn set(&self, offsets: PartitionOffsets) {
        self.log_start.set(offsets.log_start);
        self.high_watermark.set(offsets.high_watermark);
        self.log_end.set(offsets.log_end);
        self.bytes.set(offsets.bytes);
    }

    /// Publishes the partition's replicas, ISR size and slowest follower's lag.
    pub fn set_replication(&self, replicas: usize, in_sync: usize, lag: u64) {
        self.replicas.set(replicas as i64);
        self.in_sync_replicas.set(in_sync as i64);
        self.replica_lag.set(lag as i64);
    }
}

/// A partition's offsets and size as metrics publish them.
#[derive(Debug, Clone, Copy)]
pub struct PartitionOffsets {
    /// First offset still stored.
    pub log_start: i64,
    /// One past the last durable offset.
    pub high_watermark: i64,
    /// One past the last appended offset.
    pub log_end: i64,
    /// Bytes of the partition's segments.
    pub bytes: i64,
}
