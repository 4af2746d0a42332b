//! How a host's metadata is kept on disk: JSON files replaced atomically (a temporary
//! file, fdatasync, rename, directory fsync), so a crash leaves the old file or the
//! new one. A single host keeps its topics in `topics.json`; a cluster host keeps the
//! metadata it last installed in `cluster-metadata.json`.

use std::path::{Path, PathBuf};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::security::state::SecurityState;

use super::{cluster_state::ClusterState, topic::TopicInfo};

/// File name of a single host's registry inside the data directory.
pub const REGISTRY_FILE: &str = "topics.json";

/// `topics.json`.
#[derive(Default, Serialize, Deserialize)]
pub(super) struct RegistryFile {
    pub(super) topics: Vec<TopicInfo>,
    /// Users' credentials (absent in files written before SASL: none).
    #[serde(default)]
    pub(super) security: SecurityState,
}

/// File name of a cluster host's last installed metadata inside the data directory.
pub const CLUSTER_FILE: &str = "cluster-metadata.json";

#[derive(Serialize, Deserialize)]
pub(super) struct ClusterFile {
    pub(super) version: u64,
    pub(super) state: ClusterState,
}

/// Why a metadata file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read or written.
    #[error("metadata file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid JSON of the expected shape.
    #[error("metadata file {path} is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The JSON value in `path`, or `None` when there is no such file.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, FileError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| FileError::Corrupt {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FileError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Replaces `path` with `value` as JSON, atomically and durably. Blocking.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), FileError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| FileError::Corrupt {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    write_atomically(path, &bytes).map_err(|source| FileError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `bytes` to `path` so a crash leaves the old file or the new one: a temporary
/// file, fdatasync, rename, directory fsync. Blocking.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_data()?;
    std::fs::rename(&tmp, path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir)?.sync_all()
}
