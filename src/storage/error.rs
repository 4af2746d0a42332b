//! The storage engine's error type.

use std::{io, path::PathBuf};

use super::{record_batch::BatchError, Offset};

/// Why a fenced partition refuses appends: the failed operation and its OS error,
/// kept as plain values so every waiting append can be failed with a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceReason {
    /// The operation that failed (`"write"`, `"fdatasync"`, ...).
    pub op: &'static str,
    /// The kind of the I/O error.
    pub kind: io::ErrorKind,
    /// The OS error number, when there was one (`ENOSPC` is 28, `EIO` is 5).
    pub raw_os_error: Option<i32>,
}

impl std::fmt::Display for FenceReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.raw_os_error {
            Some(errno) => write!(f, "{} failed: {} (os error {errno})", self.op, self.kind),
            None => write!(f, "{} failed: {}", self.op, self.kind),
        }
    }
}

/// Everything the storage engine can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An I/O operation on a file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A produce payload was not a valid RecordBatch v2.
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] BatchError),
    /// A read asked for an offset outside `[log_start_offset, high_watermark]`.
    #[error("offset {requested} is out of range [{log_start}, {high_watermark}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        requested: Offset,
        /// The log start offset.
        log_start: Offset,
        /// The high watermark.
        high_watermark: Offset,
    },
    /// A previous write or fdatasync failed; the partition refuses appends until it is
    /// reopened, because the kernel may have dropped the data it failed to write.
    #[error("partition {path} is fenced after an I/O error ({reason}); reopen it")]
    Fenced {
        /// The partition directory.
        path: PathBuf,
        /// The failure that fenced it.
        reason: FenceReason,
    },
    /// A stored batch failed its checks while being read back (media corruption after
    /// recovery, or an index pointing into the middle of a batch).
    #[error("corrupt data in {path} at byte {position}: {detail}")]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// Where the bad bytes start.
        position: u64,
        /// What was wrong.
        detail: String,
    },
    /// This replica stopped leading the partition while an append waited to be
    /// committed; the new leader may not keep it.
    #[error("partition {0}: no longer the leader")]
    NotLeader(PathBuf),
    /// A replica's append did not continue the log: its first offset is not the log end.
    #[error("partition {path}: replicated batch at offset {offset} does not continue the log at {log_end}")]
    NotContiguous {
        /// The partition directory.
        path: PathBuf,
        /// The batch's base offset.
        offset: i64,
        /// The log end offset.
        log_end: Offset,
    },
    /// The partition was closed or deleted while the operation was pending.
    #[error("partition {0} is closed")]
    Closed(PathBuf),
    /// Offsets would overflow what a segment can index (more than 2^32 records in one
    /// segment), or the log would pass `i64::MAX`.
    #[error("offset overflow in {0}")]
    OffsetOverflow(PathBuf),
    /// An idempotent producer's batch was out of sequence or from a fenced epoch.
    #[error(transparent)]
    Sequence(#[from] super::producer_state::SequenceError),
    /// A configuration value is out of its allowed range.
    #[error("invalid storage configuration: {0}")]
    InvalidConfig(String),
}

/// The storage engine's result type.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Errors that carry an OS error underneath. glommio's own conversion to `io::Error`
/// re-wraps its enhanced errors as strings and loses the errno (ENOSPC, EIO), which
/// callers need to tell a full disk from a failing one, so this unwraps them.
pub trait IntoOsError {
    /// The underlying `io::Error`, with its errno when there is one.
    fn into_os_error(self) -> io::Error;
}

impl IntoOsError for io::Error {
    fn into_os_error(self) -> io::Error {
        self
    }
}

impl<T> IntoOsError for glommio::GlommioError<T> {
    fn into_os_error(self) -> io::Error {
        match self {
            glommio::GlommioError::IoError(e) => e,
            glommio::GlommioError::EnhancedIoError { source, .. } => source,
            other => other.into(),
        }
    }
}

impl StorageError {
    /// `Ok` when a write of `want` bytes at `at` wrote them all; a short write is an I/O
    /// error (`WriteZero`) that fences the partition like any other.
    pub fn check_full_write(
        path: &std::path::Path,
        at: u64,
        written: usize,
        want: usize,
    ) -> Result<()> {
        if written == want {
            return Ok(());
        }
        Err(StorageError::io(
            "write",
            path,
            io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write at {at}: {written} of {want} bytes"),
            ),
        ))
    }

    /// Wraps an I/O error with the operation and the path it concerned.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: impl IntoOsError) -> Self {
        StorageError::Io {
            op,
            path: path.into(),
            source: source.into_os_error(),
        }
    }

    /// The fence reason this error would set on a partition, if it is an I/O error.
    pub fn fence_reason(&self) -> Option<FenceReason> {
        match self {
            StorageError::Io { op, source, .. } => Some(FenceReason {
                op,
                kind: source.kind(),
                raw_os_error: source.raw_os_error(),
            }),
            StorageError::Fenced { reason, .. } => Some(reason.clone()),
            _ => None,
        }
    }
}
