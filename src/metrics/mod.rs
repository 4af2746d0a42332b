//! What the broker says about itself while it runs: Prometheus metrics, served with the
//! health and readiness checks by [`http`].
//!
//! Every family is created once at start ([`BrokerMetrics::new`]), each component's by
//! its own file — requests, connections, topics and partitions, groups, storage — and
//! registered in one registry that only the metrics thread reads. Each shard takes its
//! own handles out of the families ([`ShardMetrics`], labelled `shard`): on the request
//! path a shard touches only its own counters (uncontended atomics no other core
//! writes), and a scrape reads them all. Per-topic counters are looked up once per
//! topic and shard, then kept. Partition offsets and other shard-local state are
//! published by each shard once a second, so a scrape never waits for a shard.

pub mod connection_metrics;
pub mod group_metrics;
pub mod group_offsets;
pub mod http;
pub mod partition_metrics;
pub mod replication_metrics;
pub mod request_metrics;
pub mod storage_metrics;
pub mod transaction_metrics;

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use prometheus_client::{encoding::EncodeLabelSet, registry::Registry};

pub use connection_metrics::ConnectionMetrics;
pub use group_metrics::GroupMetrics;
pub use partition_metrics::{PartitionGauges, PartitionMetrics, PartitionOffsets};
pub use replication_metrics::{ControllerMetrics, ReplicationMetrics};
pub use request_metrics::RequestMetrics;
pub use storage_metrics::StorageMetrics;
pub use transaction_metrics::TransactionMetrics;

pub use group_offsets::{CommittedOffsets, CommittedRow};

/// A shard's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShardLabel {
    /// The shard index.
    pub shard: u32,
}

/// Every metric family of the broker, and the registry they are served from.
pub struct BrokerMetrics {
    registry: Registry,
    shards: usize,
    serving: AtomicUsize,
    requests: request_metrics::RequestFamilies,
    connections: connection_metrics::ConnectionFamilies,
    partitions: partition_metrics::PartitionFamilies,
    groups: group_metrics::GroupFamilies,
    storage: storage_metrics::StorageFamilies,
    transactions: transaction_metrics::TransactionFamilies,
    replication: replication_metrics::ReplicationFamilies,
}

impl BrokerMetrics {
    /// Creates and registers every family for a broker of `shards` shards, with the
    /// host's view of the controller quorum.
    pub fn new(
        shards: usize,
        offsets: Arc<dyn CommittedOffsets>,
        controller: &ControllerMetrics,
    ) -> Arc<BrokerMetrics> {
        let mut registry = Registry::with_prefix("weir");
        let requests = request_metrics::RequestFamilies::register(&mut registry);
        let connections = connection_metrics::ConnectionFamilies::register(&mut registry);
        let partitions = partition_metrics::PartitionFamilies::register(&mut registry);
        let groups = group_metrics::GroupFamilies::register(&mut registry);
        registry.register_collector(Box::new(group_offsets::GroupOffsets::new(
            offsets,
            partitions.high_watermarks(),
        )));
        let storage = storage_metrics::StorageFamilies::register(&mut registry);
        let transactions = transaction_metrics::TransactionFamilies::register(&mut registry);
        let replication = replication_metrics::ReplicationFamilies::register(&mut registry);
        controller.register(&mut registry);
        Arc::new(BrokerMetrics {
            registry,
            shards,
            serving: AtomicUsize::new(0),
            requests,
            connections,
            partitions,
            groups,
            storage,
            transactions,
            replication,
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

/// One shard's handles into the families, by component. `!Send` (their caches are
/// shard-local).
pub struct ShardMetrics {
    broker: Arc<BrokerMetrics>,
    /// Requests, their latency and the errors answered.
    pub requests: RequestMetrics,
    /// Connections and the request bytes held.
    pub connections: ConnectionMetrics,
    /// Topics' and partitions' counters and gauges.
    pub partitions: PartitionMetrics,
    /// The groups this shard coordinates.
    pub groups: GroupMetrics,
    /// The storage engine's metrics of this shard.
    pub storage: StorageMetrics,
    /// The transactions this shard coordinates.
    pub transactions: TransactionMetrics,
    /// The replication of the partitions this shard leads or follows.
    pub replication: ReplicationMetrics,
}

impl ShardMetrics {
    /// Shard `shard`'s handles.
    pub fn new(broker: Arc<BrokerMetrics>, shard: usize) -> ShardMetrics {
        let shard = shard as u32;
        ShardMetrics {
            requests: broker.requests.for_shard(shard),
            connections: broker.connections.for_shard(shard),
            partitions: broker.partitions.for_shard(shard),
            groups: broker.groups.for_shard(shard),
            storage: broker.storage.for_shard(shard),
            transactions: broker.transactions.for_shard(shard),
            replication: broker.replication.for_shard(shard),
            broker,
        }
    }

    /// The broker-wide metrics.
    pub fn broker(&self) -> &Arc<BrokerMetrics> {
        &self.broker
    }
}
