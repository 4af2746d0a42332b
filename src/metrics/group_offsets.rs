//! Consumer groups' committed offsets and lag, computed when Prometheus scrapes: the
//! committed offsets are read through the [`CommittedOffsets`] reader the group layer
//! registers (its LMDB store: a read transaction on the metrics thread, which LMDB allows
//! beside the shards' writers), the high watermarks from what the shards last published.
//! Lag = high watermark − committed offset, the records the group has yet to consume.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        gauge::{ConstGauge, Gauge},
        MetricType,
    },
};

/// One committed offset as the metrics serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedRow {
    /// The group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// The next offset the group will consume.
    pub offset: i64,
}

/// Where the committed offsets come from: the group layer's store, registered at start,
/// read on the metrics thread at every scrape (so it must not wait on a shard).
pub trait CommittedOffsets: Send + Sync {
    /// Every group's committed offsets, groups in any order.
    fn committed_offsets(&self) -> Result<Vec<CommittedRow>, Box<dyn std::error::Error>>;
}

/// Each partition's published high-watermark gauge (the one `weir_partition_high_watermark`
/// serves), by topic and partition.
pub type HighWatermarks = Arc<RwLock<HashMap<String, HashMap<u32, Gauge>>>>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupPartitionLabels {
    group: String,
    topic: String,
    partition: u32,
}

/// The collector; registered once, asked at every scrape.
pub struct GroupOffsets {
    store: Arc<dyn CommittedOffsets>,
    high_watermarks: HighWatermarks,
}

impl GroupOffsets {
    /// Reads committed offsets from `store` and high watermarks from `high_watermarks`.
    pub fn new(store: Arc<dyn CommittedOffsets>, high_watermarks: HighWatermarks) -> GroupOffsets {
        GroupOffsets {
            store,
            high_watermarks,
        }
    }

    /// Every committed offset: (labels, committed, lag when the partition's high
    /// watermark is known).
    fn rows(&self) -> Vec<(GroupPartitionLabels, i64, Option<i64>)> {
        let committed = match self.store.committed_offsets() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "metrics: cannot read committed offsets");
                return Vec::new();
            }
        };
        let hw = match self.high_watermarks.read() {
            Ok(hw) => hw,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut rows = Vec::with_capacity(committed.len());
        for c in committed {
            let lag = hw
                .get(&c.topic)
                .and_then(|parts| parts.get(&c.partition))
                .map(|hw| (hw.get() - c.offset).max(0));
            rows.push((
                GroupPartitionLabels {
                    group: c.group,
                    topic: c.topic,
                    partition: c.partition,
                },
                c.offset,
                lag,
            ));
        }
        rows
    }
}

impl std::fmt::Debug for GroupOffsets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupOffsets").finish_non_exhaustive()
    }
}

impl Collector for GroupOffsets {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let rows = self.rows();
        {
            let mut committed = encoder.encode_descriptor(
                "group_committed_offset",
                "The next offset the group will consume, as it committed it",
                None,
                MetricType::Gauge,
            )?;
            for (labels, offset, _) in &rows {
                ConstGauge::new(*offset).encode(committed.encode_family(labels)?)?;
            }
        }
        let mut lag = encoder.encode_descriptor(
            "group_lag",
            "Records the group has yet to consume: the partition's high watermark minus the committed offset",
            None,
            MetricType::Gauge,
        )?;
        for (labels, _, l) in &rows {
            if let Some(l) = l {
                ConstGauge::new(*l).encode(lag.encode_family(labels)?)?;
            }
        }
        Ok(())
    }
}
