//! The storage engine's metrics: group-commit rounds, the batch cache, recovery,
//! retention and fencing. The engine records into a shard's [`StorageMetrics`] handles;
//! unregistered handles ([`StorageMetrics::default`]) serve tests and benches.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::{Registry, Unit},
};

use super::ShardLabel;

type Histograms = Family<ShardLabel, Histogram, fn() -> Histogram>;

/// A gauge of seconds (a float, as Prometheus base units want).
pub type SecondsGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

fn seconds_histogram() -> Histogram {
    // 10 µs to ~5 s: a bare device flush to a stalled disk.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        10e-6, 2.0, 20,
    ))
}

fn partitions_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        1.0, 2.0, 12,
    ))
}

/// A shard and what its writes carried (`log`, `index` or `zeros`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WrittenLabels {
    shard: u32,
    kind: &'static str,
}

/// The storage families, registered once.
pub(super) struct StorageFamilies {
    rounds: Family<ShardLabel, Counter>,
    round_seconds: Histograms,
    sync_seconds: Histograms,
    round_partitions: Histograms,
    round_bytes: Family<ShardLabel, Counter>,
    slow_rounds: Family<ShardLabel, Counter>,
    cache_hits: Family<ShardLabel, Counter>,
    cache_misses: Family<ShardLabel, Counter>,
    cache_bytes: Family<ShardLabel, Gauge>,
    recovered_segments: Family<ShardLabel, Counter>,
    truncated_bytes: Family<ShardLabel, Counter>,
    retention_deleted: Family<ShardLabel, Counter>,
    fenced: Family<ShardLabel, Counter>,
    recycled_segments: Family<ShardLabel, Counter>,
    flush_interval: Family<ShardLabel, SecondsGauge>,
    written: Family<WrittenLabels, Counter>,
}

impl StorageFamilies {
    /// The families, registered nowhere yet.
    fn new() -> StorageFamilies {
        StorageFamilies {
            rounds: Family::default(),
            round_seconds: Family::new_with_constructor(seconds_histogram),
            sync_seconds: Family::new_with_constructor(seconds_histogram),
            round_partitions: Family::new_with_constructor(partitions_histogram),
            round_bytes: Family::default(),
            slow_rounds: Family::default(),
            cache_hits: Family::default(),
            cache_misses: Family::default(),
            cache_bytes: Family::default(),
            recovered_segments: Family::default(),
            truncated_bytes: Family::default(),
            retention_deleted: Family::default(),
            fenced: Family::default(),
            recycled_segments: Family::default(),
            flush_interval: Family::default(),
            written: Family::default(),
        }
    }

    /// The families, registered in `registry`.
    pub(super) fn register(registry: &mut Registry) -> StorageFamilies {
        let f = StorageFamilies::new();
        registry.register(
            "flush_rounds",
            "Group-commit rounds completed",
            f.rounds.clone(),
        );
        registry.register_with_unit(
            "flush_round",
            "Group-commit round time: writes and fdatasync, what every acknowledgement in the round waited for",
            Unit::Seconds,
            f.round_seconds.clone(),
        );
        registry.register_with_unit(
            "flush_sync",
            "Time of a round's fdatasync(s), after its writes",
            Unit::Seconds,
            f.sync_seconds.clone(),
        );
        registry.register(
            "flush_round_partitions",
            "Partitions written per group-commit round",
            f.round_partitions.clone(),
        );
        registry.register_with_unit(
            "flush",
            "Bytes appended and made durable by group-commit rounds",
            Unit::Bytes,
            f.round_bytes.clone(),
        );
        registry.register(
            "flush_slow_rounds",
            "Group-commit rounds of 100 ms or more (each also logged as a warning)",
            f.slow_rounds.clone(),
        );
        registry.register(
            "batch_cache_hits",
            "Reads served from the batch cache",
            f.cache_hits.clone(),
        );
        registry.register(
            "batch_cache_misses",
            "Reads that went to the disk",
            f.cache_misses.clone(),
        );
        registry.register_with_unit(
            "batch_cache",
            "Bytes held by the batch cache (bounded by --cache-bytes)",
            Unit::Bytes,
            f.cache_bytes.clone(),
        );
        registry.register(
            "recovered_segments",
            "Segments opened and checked by recovery since start",
            f.recovered_segments.clone(),
        );
        registry.register_with_unit(
            "recovery_truncated",
            "Bytes recovery cut from damaged log tails since start (zero padding not counted)",
            Unit::Bytes,
            f.truncated_bytes.clone(),
        );
        registry.register(
            "retention_deleted_segments",
            "Segments deleted by retention",
            f.retention_deleted.clone(),
        );
        registry.register(
            "fenced_partitions",
            "Partitions fenced after a failed write or fdatasync",
            f.fenced.clone(),
        );
        registry.register(
            "recycled_segments",
            "Segments created by overwriting a retired segment's file from the shard's pool (no trim, no zero-fill)",
            f.recycled_segments.clone(),
        );
        registry.register_with_unit(
            "flush_interval",
            "Group-commit interval in force: fixed, or chosen by the adaptive controller (--flush-target-p99)",
            Unit::Seconds,
            f.flush_interval.clone(),
        );
        registry.register_with_unit(
            "storage_written",
            "Bytes the shard's O_DIRECT writes handed the device, by kind: log (the data, plus the partial 4 KiB page each round rewrites and pads), index, zeros (zero-fill ahead of new segments' data, and retired index files zeroed for reuse); over weir_flush_bytes_total, the write amplification",
            Unit::Bytes,
            f.written.clone(),
        );
        f
    }

    pub(super) fn for_shard(&self, shard: u32) -> StorageMetrics {
        let l = ShardLabel { shard };
        StorageMetrics {
            rounds: self.rounds.get_or_create_owned(&l),
            round_seconds: self.round_seconds.get_or_create_owned(&l),
            sync_seconds: self.sync_seconds.get_or_create_owned(&l),
            round_partitions: self.round_partitions.get_or_create_owned(&l),
            round_bytes: self.round_bytes.get_or_create_owned(&l),
            slow_rounds: self.slow_rounds.get_or_create_owned(&l),
            cache_hits: self.cache_hits.get_or_create_owned(&l),
            cache_misses: self.cache_misses.get_or_create_owned(&l),
            cache_bytes: self.cache_bytes.get_or_create_owned(&l),
            recovered_segments: self.recovered_segments.get_or_create_owned(&l),
            truncated_bytes: self.truncated_bytes.get_or_create_owned(&l),
            retention_deleted: self.retention_deleted.get_or_create_owned(&l),
            fenced: self.fenced.get_or_create_owned(&l),
            recycled_segments: self.recycled_segments.get_or_create_owned(&l),
            flush_interval: self.flush_interval.get_or_create_owned(&l),
            written_log: self.written(shard, "log"),
            written_index: self.written(shard, "index"),
            written_zeros: self.written(shard, "zeros"),
        }
    }

    fn written(&self, shard: u32, kind: &'static str) -> Counter {
        self.written
            .get_or_create_owned(&WrittenLabels { shard, kind })
    }
}

/// One shard's storage metrics. Cloning shares them.
#[derive(Clone)]
pub struct StorageMetrics {
    /// Group-commit rounds completed.
    pub rounds: Counter,
    /// Round time, writes and fdatasync.
    pub round_seconds: Histogram,
    /// fdatasync time per round.
    pub sync_seconds: Histogram,
    /// Partitions written per round.
    pub round_partitions: Histogram,
    /// Bytes made durable by rounds.
    pub round_bytes: Counter,
    /// Rounds of 100 ms or more.
    pub slow_rounds: Counter,
    /// Reads served by the batch cache.
    pub cache_hits: Counter,
    /// Reads that went to the disk.
    pub cache_misses: Counter,
    /// Bytes the batch cache holds.
    pub cache_bytes: Gauge,
    /// Segments recovered at open.
    pub recovered_segments: Counter,
    /// Bytes recovery cut from damaged tails.
    pub truncated_bytes: Counter,
    /// Segments deleted by retention.
    pub retention_deleted: Counter,
    /// Partitions fenced after an I/O error.
    pub fenced: Counter,
    /// Segments created from a recycled file.
    pub recycled_segments: Counter,
    /// Group-commit interval in force, in seconds.
    pub flush_interval: SecondsGauge,
    /// Bytes written to segment logs (with each round's rewritten and padded pages).
    pub written_log: Counter,
    /// Bytes written to index files.
    pub written_index: Counter,
    /// Zeros written ahead of segment data.
    pub written_zeros: Counter,
}

impl std::fmt::Debug for StorageMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageMetrics").finish_non_exhaustive()
    }
}

impl Default for StorageMetrics {
    /// Handles registered nowhere: for storage used outside a broker (tests, benches).
    fn default() -> StorageMetrics {
        StorageFamilies::new().for_shard(0)
    }
}
