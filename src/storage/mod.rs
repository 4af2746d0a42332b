//! weir's storage engine: partition logs of O_DIRECT segment files, made durable by a
//! per-shard group commit, recovered after crashes by replaying the tail.
//!
//! The data path of an append:
//! 1. [`record_batch`] validates the producer's RecordBatch v2 bytes (header, length,
//!    CRC-32C) without decoding records;
//! 2. [`partition_log`] assigns offsets and hands the batch to the active
//!    [`segment`], whose [`segment_appender`] copies it, with the broker's `baseOffset`
//!    written over the producer's, into an aligned in-memory chunk, and whose
//!    [`segment_index`] records an index entry every `index_interval_bytes`;
//! 3. [`flush`] runs one group commit per shard, when its interval (fixed, or chosen by
//!    [`flush_control`]) has passed: every dirty log's chunks are written with O_DIRECT
//!    and fdatasynced concurrently, then the high watermark moves and the appends'
//!    [`partition_log::Durable`] futures resolve;
//! 4. the written chunks stay in the shard's [`batch_cache`], so reads of the tail
//!    ([`segment_reader`]) come from memory; older data is read with aligned DMA reads.
//!
//! [`recovery`] repairs a segment on open; [`shard_storage`] owns the per-shard parts;
//! [`segment_pool`] recycles deleted segments' files into new segments.
//!
//! On disk, a partition is a directory of segments named by their 20-digit base offset:
//! `.log` (batches exactly as Kafka stores them), `.index` and `.timeindex` (Kafka's
//! layouts). See docs/architecture.md ("On-disk format") for the format.

pub mod batch_cache;
pub mod batch_compaction;
pub mod batch_records;
pub mod clock;
pub mod config;
pub mod error;
mod failpoint;
pub mod flush;
pub mod flush_control;
pub mod log_env;
pub mod partition_log;
pub mod partition_txns;
pub mod producer_state;
pub mod record_batch;
pub mod recovery;
pub mod segment;
pub mod segment_appender;
pub mod segment_files;
pub mod segment_index;
pub mod segment_pool;
pub mod segment_reader;
pub mod shard_storage;
pub mod zero_fill;

#[cfg(test)]
pub(crate) mod test_support;

pub use clock::Clock;
pub use config::{CleanupPolicy, FileGrowth, FlushConfig, FlushMode, LogConfig};
pub use error::{FenceReason, Result, StorageError};
pub use partition_log::{
    Appended, LogOffsets, LogRead, PartitionLog, TimestampOffset, TimestampQuery,
};
pub use record_batch::{BatchError, ProducePayload, RecordBatch};
pub use shard_storage::{DurableMark, ShardStorage, ShardStorageConfig};

/// A Kafka offset: the position of a record in its partition. Never negative.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Offset(pub u64);

impl Offset {
    /// The offset as Kafka's wire format carries it.
    pub fn to_wire(self) -> i64 {
        debug_assert!(self.0 <= i64::MAX as u64);
        self.0 as i64
    }
}

impl std::fmt::Display for Offset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for Offset {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        s.parse().map(Offset)
    }
}

/// A byte position inside a segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FilePosition(pub u64);
