//! Topic and partition metrics: records and bytes produced and fetched by topic, and
//! each partition's offsets, size and replication as its shard publishes them every
//! second. The high-watermark gauges are also what the group-lag collector reads.

use std::{cell::RefCell, collections::HashMap, sync::Arc};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::{Registry, Unit},
};

use super::group_offsets::HighWatermarks;

/// A shard and a topic.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TopicLabels {
    /// The shard index.
    pub shard: u32,
    /// The topic.
    pub topic: String,
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

/// The topic and partition families, registered once.
#[derive(Clone)]
pub(super) struct PartitionFamilies {
    records_in: Family<TopicLabels, Counter>,
    bytes_in: Family<TopicLabels, Counter>,
    bytes_out: Family<TopicLabels, Counter>,
    log_start: Family<PartitionLabels, Gauge>,
    high_watermark: Family<PartitionLabels, Gauge>,
    log_end: Family<PartitionLabels, Gauge>,
    stable_lag: Family<PartitionLabels, Gauge>,
    log_bytes: Family<PartitionLabels, Gauge>,
    replicas: Family<PartitionLabels, Gauge>,
    in_sync_replicas: Family<PartitionLabels, Gauge>,
    replica_lag: Family<PartitionLabels, Gauge>,
    high_watermarks: HighWatermarks,
}

impl PartitionFamilies {
    /// Creates the families and registers them in `registry`.
    pub(super) fn register(registry: &mut Registry) -> PartitionFamilies {
        let f = PartitionFamilies {
            records_in: Family::default(),
            bytes_in: Family::default(),
            bytes_out: Family::default(),
            log_start: Family::default(),
            high_watermark: Family::default(),
            log_end: Family::default(),
            stable_lag: Family::default(),
            log_bytes: Family::default(),
            replicas: Family::default(),
            in_sync_replicas: Family::default(),
            replica_lag: Family::default(),
            high_watermarks: HighWatermarks::default(),
        };
        registry.register(
            "records_produced",
            "Records appended by produce requests, by topic",
            f.records_in.clone(),
        );
        registry.register_with_unit(
            "produced",
            "Record-batch bytes appended by produce requests, by topic",
            Unit::Bytes,
            f.bytes_in.clone(),
        );
        registry.register_with_unit(
            "fetched",
            "Record-batch bytes returned by fetch requests, by topic",
            Unit::Bytes,
            f.bytes_out.clone(),
        );
        registry.register(
            "partition_log_start_offset",
            "First offset still stored (published every second)",
            f.log_start.clone(),
        );
        registry.register(
            "partition_high_watermark",
            "One past the last durable offset: what consumers can read (published every second)",
            f.high_watermark.clone(),
        );
        registry.register(
            "partition_log_end_offset",
            "One past the last appended offset (published every second)",
            f.log_end.clone(),
        );
        registry.register(
            "partition_last_stable_offset_lag",
            "Offsets between the last stable offset and the high watermark: what open transactions hold back from read_committed consumers (published every second; Kafka's LastStableOffsetLag)",
            f.stable_lag.clone(),
        );
        registry.register_with_unit(
            "partition_disk",
            "Bytes of the partition's segments (published every second)",
            Unit::Bytes,
            f.log_bytes.clone(),
        );
        registry.register(
            "partition_replicas",
            "Replicas of the partition (published every second by each replica's shard)",
            f.replicas.clone(),
        );
        registry.register(
            "partition_in_sync_replicas",
            "Replicas in the partition's ISR; below weir_partition_replicas: under-replicated",
            f.in_sync_replicas.clone(),
        );
        registry.register(
            "partition_replica_lag",
            "Offsets the slowest follower is behind the log end (on the leader's shard; 0 on followers)",
            f.replica_lag.clone(),
        );
        f
    }

    /// The high-watermark gauges of every partition, for the group-lag collector.
    pub(super) fn high_watermarks(&self) -> HighWatermarks {
        Arc::clone(&self.high_watermarks)
    }

    /// Shard `shard`'s handles.
    pub(super) fn for_shard(&self, shard: u32) -> PartitionMetrics {
        PartitionMetrics {
            shard,
            families: self.clone(),
            topics: RefCell::default(),
        }
    }
}

struct TopicCounters {
    records_in: Counter,
    bytes_in: Counter,
    bytes_out: Counter,
}

/// One shard's topic and partition metrics. `!Send` (its per-topic cache is
/// shard-local).
pub struct PartitionMetrics {
    shard: u32,
    families: PartitionFamilies,
    /// Per-topic counters, looked up once per topic.
    topics: RefCell<HashMap<String, TopicCounters>>,
}

impl PartitionMetrics {
    /// Runs `count` on `topic`'s counters, creating them on the topic's first use.
    fn with_topic(&self, topic: &str, count: impl FnOnce(&TopicCounters)) {
        if let Some(c) = self.topics.borrow().get(topic) {
            return count(c);
        }
        let labels = TopicLabels {
            shard: self.shard,
            topic: topic.to_string(),
        };
        let f = &self.families;
        let counters = TopicCounters {
            records_in: f.records_in.get_or_create_owned(&labels),
            bytes_in: f.bytes_in.get_or_create_owned(&labels),
            bytes_out: f.bytes_out.get_or_create_owned(&labels),
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

    fn labels(&self, topic: &str, partition: u32) -> PartitionLabels {
        PartitionLabels {
            shard: self.shard,
            topic: topic.to_string(),
            partition,
        }
    }

    /// A partition's gauges, to keep and [`PartitionGauges::set`] every publication;
    /// its high-watermark gauge is also what the lag collector reads.
    pub fn gauges(&self, topic: &str, partition: u32) -> PartitionGauges {
        let labels = self.labels(topic, partition);
        let f = &self.families;
        let gauges = PartitionGauges {
            log_start: f.log_start.get_or_create_owned(&labels),
            high_watermark: f.high_watermark.get_or_create_owned(&labels),
            log_end: f.log_end.get_or_create_owned(&labels),
            stable_lag: f.stable_lag.get_or_create_owned(&labels),
            bytes: f.log_bytes.get_or_create_owned(&labels),
            replicas: f.replicas.get_or_create_owned(&labels),
            in_sync_replicas: f.in_sync_replicas.get_or_create_owned(&labels),
            replica_lag: f.replica_lag.get_or_create_owned(&labels),
        };
        if let Ok(mut hw) = f.high_watermarks.write() {
            hw.entry(labels.topic)
                .or_default()
                .insert(partition, gauges.high_watermark.clone());
        }
        gauges
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
        let f = &self.families;
        for family in [&f.records_in, &f.bytes_in, &f.bytes_out] {
            family.remove(&labels);
        }
    }

    /// Stops publishing a partition that left this shard (its topic was deleted).
    pub fn forget_partition(&self, topic: &str, partition: u32) {
        let labels = self.labels(topic, partition);
        let f = &self.families;
        for family in [
            &f.log_start,
            &f.high_watermark,
            &f.log_end,
            &f.stable_lag,
            &f.log_bytes,
            &f.replicas,
            &f.in_sync_replicas,
            &f.replica_lag,
        ] {
            family.remove(&labels);
        }
        if let Ok(mut hw) = f.high_watermarks.write() {
            if let Some(parts) = hw.get_mut(topic) {
                parts.remove(&partition);
                if parts.is_empty() {
                    hw.remove(topic);
                }
            }
        }
    }
}

/// One partition's published gauges; see [`PartitionMetrics::gauges`].
pub struct PartitionGauges {
    log_start: Gauge,
    high_watermark: Gauge,
    log_end: Gauge,
    stable_lag: Gauge,
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
        self.stable_lag
            .set(offsets.high_watermark - offsets.last_stable);
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
    /// The last stable offset: the first offset of the oldest open transaction, or the
    /// high watermark when none is open.
    pub last_stable: i64,
    /// Bytes of the partition's segments.
    pub bytes: i64,
}
