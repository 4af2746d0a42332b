//! Typed settings of the storage engine, with Kafka's names and defaults where Kafka
//! has the same knob, each validated before a partition or shard uses it.

use std::time::Duration;

use super::{Result, StorageError};

/// Largest batch recovery will read as one unit. A length field read from disk above
/// this is treated as corruption rather than allocated.
pub const STORED_BATCH_BYTES_MAX: usize = 128 << 20;

/// How a segment file gets its disk space as it grows. Chosen by measurement (see
/// `benches/durable_append.rs` and docs/architecture.md): the difference is what the fdatasync
/// after each group commit has to persist besides the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileGrowth {
    /// Plain appending writes: each flush extends the file and fdatasync persists the
    /// new size with the data.
    Append,
    /// `fallocate` the next `step_bytes` whenever the writes pass the allocated end;
    /// writes then land in unwritten extents that fdatasync must convert.
    Fallocate {
        /// Bytes allocated per step.
        step_bytes: u64,
    },
    /// Write zeros `step_bytes` ahead of the tail, so later flushes overwrite blocks
    /// that are already written and allocated.
    ZeroFill {
        /// Bytes of zeros written per step.
        step_bytes: u64,
    },
}

/// Per-partition log settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll to a new segment when the active one would pass this size (`segment.bytes`).
    pub segment_bytes: u64,
    /// Roll when the active segment is older than this (`segment.ms`).
    pub segment_age_max: Option<Duration>,
    /// Delete sealed segments whose newest record is older than this (`retention.ms`).
    pub retention_age_max: Option<Duration>,
    /// Delete the oldest sealed segments while the log is larger than this
    /// (`retention.bytes`).
    pub retention_bytes_max: Option<u64>,
    /// Add an index entry after at least this many log bytes (`index.interval.bytes`).
    pub index_interval_bytes: u64,
    /// Largest in-memory write chunk; full chunks wait for the next flush.
    pub write_chunk_bytes_max: usize,
    /// How segment files grow.
    pub growth: FileGrowth,
    /// What happens to old data (`cleanup.policy`).
    pub cleanup: CleanupPolicy,
    /// How long compaction keeps a tombstone (a record with a null value) once it is
    /// the newest record of its key (`delete.retention.ms`).
    pub delete_retention: Duration,
    /// Records newer than this are not compacted (`min.compaction.lag.ms`).
    pub min_compaction_lag: Duration,
}

/// Kafka's `cleanup.policy`: which of retention and compaction remove old records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// Retention deletes whole segments by age and size (`delete`, the default).
    Delete,
    /// Compaction keeps the newest record of each key; retention deletes nothing
    /// (`compact`).
    Compact,
    /// Both (`compact,delete`).
    CompactAndDelete,
}

impl CleanupPolicy {
    /// True when retention deletes segments.
    pub fn deletes(self) -> bool {
        matches!(
            self,
            CleanupPolicy::Delete | CleanupPolicy::CompactAndDelete
        )
    }

    /// True when compaction runs.
    pub fn compacts(self) -> bool {
        matches!(
            self,
            CleanupPolicy::Compact | CleanupPolicy::CompactAndDelete
        )
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_age_max: Some(Duration::from_secs(7 * 24 * 3600)),
            retention_age_max: Some(Duration::from_secs(7 * 24 * 3600)),
            retention_bytes_max: None,
            index_interval_bytes: 4096,
            write_chunk_bytes_max: 1 << 20,
            // Measured by `benches/storage.sh` (figures in docs/architecture.md): with plain
            // appends every fdatasync also commits the new size and the block allocation
            // through the ext4 journal, which caps a 1 ms group commit at ~0.66x of fio's
            // sequential write bandwidth; fallocate'd (unwritten) extents cost the same
            // conversion. Writing zeros a little ahead makes the data writes overwrites
            // of allocated, written blocks, so the fdatasync is a bare device flush:
            // ~0.85x fio at 1 ms and 5 ms. Steps of 2 MiB beat 8 and 32 MiB because a
            // round waits for its zero-fill, and a large one stalls it.
            growth: FileGrowth::ZeroFill {
                step_bytes: 2 << 20,
            },
            cleanup: CleanupPolicy::Delete,
            // Kafka's defaults: a day, and no lag.
            delete_retention: Duration::from_secs(24 * 3600),
            min_compaction_lag: Duration::ZERO,
        }
    }
}

impl LogConfig {
    /// Checks every value against its range; the error names the setting.
    pub fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(StorageError::InvalidConfig(s));
        if self.segment_bytes < 4096 || self.segment_bytes > i32::MAX as u64 {
            return bad(format!(
                "segment_bytes {} must be within [4096, {}] (index positions are 32-bit)",
                self.segment_bytes,
                i32::MAX
            ));
        }
        if self.index_interval_bytes == 0 {
            return bad("index_interval_bytes must be positive".into());
        }
        if self.write_chunk_bytes_max < 16 << 10 || self.write_chunk_bytes_max > 64 << 20 {
            return bad(format!(
                "write_chunk_bytes_max {} must be within [16 KiB, 64 MiB]",
                self.write_chunk_bytes_max
            ));
        }
        match self.growth {
            FileGrowth::Fallocate { step_bytes } | FileGrowth::ZeroFill { step_bytes }
                if step_bytes == 0 || step_bytes % 4096 != 0 =>
            {
                bad(format!(
                    "growth step {step_bytes} must be a positive multiple of 4096"
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Whether a flush makes data durable or only hands it to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushMode {
    /// Write, then fdatasync every touched file: an acknowledged append survives power
    /// loss. The default.
    Fsync,
    /// Write without fdatasync: acknowledged appends survive a process crash but not a
    /// power loss. For comparison runs only.
    WriteOnly,
}

/// Per-shard group-commit settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushConfig {
    /// How long the first unflushed append waits for company before a flush starts.
    /// Zero flushes as soon as the reactor is free, batching whatever arrived meanwhile.
    pub interval: Duration,
    /// Start a flush early once this many bytes are waiting.
    pub dirty_bytes_max: u64,
    /// Durable or write-only.
    pub mode: FlushMode,
    /// When set, the interval is the adaptive controller's to choose (see
    /// `flush_control`), keeping each round's p99 commit wait under this; `interval`
    /// is then unused.
    pub target_p99: Option<Duration>,
}

impl Default for FlushConfig {
    fn default() -> Self {
        FlushConfig {
            interval: Duration::from_millis(1),
            dirty_bytes_max: 16 << 20,
            mode: FlushMode::Fsync,
            target_p99: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        LogConfig::default().validate().expect("defaults");
    }

    #[test]
    fn out_of_range_values_are_refused_with_their_name() {
        let cases = [
            LogConfig {
                segment_bytes: 1 << 40,
                ..LogConfig::default()
            },
            LogConfig {
                index_interval_bytes: 0,
                ..LogConfig::default()
            },
            LogConfig {
                write_chunk_bytes_max: 100,
                ..LogConfig::default()
            },
            LogConfig {
                growth: FileGrowth::ZeroFill { step_bytes: 1000 },
                ..LogConfig::default()
            },
        ];
        let names = [
            "segment_bytes",
            "index_interval_bytes",
            "write_chunk_bytes_max",
            "growth step",
        ];
        for (config, name) in cases.iter().zip(names) {
            let err = config.validate().expect_err(name).to_string();
            assert!(err.contains(name), "{err}");
        }
    }
}
