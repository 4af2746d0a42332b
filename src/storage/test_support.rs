//! Helpers for the storage engine's unit tests: an executor to run them on and a
//! scratch directory on the project disk (O_DIRECT does not work on tmpfs).

use std::{future::Future, path::Path};

use glommio::{LocalExecutorBuilder, Placement};

use crate::storage::{shard_storage::ShardStorageConfig, Clock, FlushConfig, ShardStorage};

/// Runs `fut` to completion on a fresh, unpinned glommio executor, after the device
/// probe every executor thread needs before its first DMA file.
pub fn run<T: 'static>(fut: impl Future<Output = T> + 'static) -> T {
    let probe_dir = test_dir();
    LocalExecutorBuilder::new(Placement::Unbound)
        .make()
        .expect("executor")
        .run(async move {
            crate::storage::shard_storage::probe_device(probe_dir.path())
                .await
                .expect("device probe");
            fut.await
        })
}

/// A scratch directory under `target/`, removed when dropped.
pub fn test_dir() -> tempfile::TempDir {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-data");
    std::fs::create_dir_all(&base).expect("create target/test-data");
    tempfile::tempdir_in(base).expect("tempdir")
}

/// Shard storage in `dir` that flushes as soon as it can.
pub async fn start_storage(dir: &Path) -> ShardStorage {
    ShardStorage::start(
        ShardStorageConfig {
            data_dir: dir.to_path_buf(),
            flush: FlushConfig {
                interval: std::time::Duration::ZERO,
                ..FlushConfig::default()
            },
            cache_bytes_max: 1 << 20,
            metrics: Default::default(),
            recycle: Default::default(),
        },
        Clock::System,
    )
    .await
    .expect("start")
}
