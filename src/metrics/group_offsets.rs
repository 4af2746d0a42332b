//! Consumer groups' committed offsets and lag, computed when Prometheus scrapes: the
//! committed offsets are read from the LMDB store (a read transaction on the metrics
//! thread, which LMDB allows beside the shards' writers), the high watermarks from what
//! the shards last published. Lag = high watermark − committed offset, the records the
//! group has yet to consume.

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

use crate::group::offset_store::OffsetStore;

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
    store: Arc<OffsetStore>,
    high_watermarks: HighWatermarks,
}

impl GroupOffsets {
    /// Reads committed offsets from `store` and high watermarks from `high_watermarks`.
    pub fn new(store: Arc<OffsetStore>, high_watermarks: HighWatermarks) -> GroupOffsets {
        GroupOffsets {
            store,
            high_watermarks,
        }
    }

    /// Every committed offset: (labels, committed, lag when the partition's high
    /// watermark is known).
    fn rows(&self) -> Vec<(GroupPartitionLabels, i64, Option<i64>)> {
        let groups = match self.store.groups() {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(error = %e, "metrics: cannot list groups");
                return Vec::new();
            }
        };
        let hw = match self.high_watermarks.read() {
            Ok(hw) => hw,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut rows = Vec::new();
        for group in groups {
            let Ok(offsets) = self.store.fetch_group(&group) else {
                continue;
            };
            for (topic, partition, committed) in offsets {
                let lag = hw
                    .get(&topic)
                    .and_then(|parts| parts.get(&partition))
                    .map(|hw| (hw.get() - committed.offset).max(0));
                rows.push((
                    GroupPartitionLabels {
                        group: group.clone(),
                        topic,
                        partition,
                    },
                    committed.offset,
                    lag,
                ));
            }
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
