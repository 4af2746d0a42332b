//! The storage engine's per-shard context: the group-commit loop, the batch cache and
//! the clock that every partition log on the shard shares.

use std::{
    cell::{Cell, RefCell},
    path::{Path, PathBuf},
    rc::Rc,
};

use glommio::Task;

use crate::metrics::StorageMetrics;

use super::{
    batch_cache::BatchCache,
    clock::Clock,
    config::{FlushConfig, LogConfig},
    flush::{FlushScheduler, RoundAfter},
    log_env::LogEnv,
    partition_log::PartitionLog,
    recovery::RecoveryReport,
    segment::open_dma,
    segment_appender::{ZeroFillSlot, ALIGN},
    segment_pool::{RecycleConfig, SegmentPool},
    Result, StorageError,
};

/// Name of the file each shard writes and reads back at start-up (see [`ShardStorage::start`]).
pub const PROBE_FILE: &str = ".dma-probe";

/// Settings of one shard's storage.
#[derive(Debug, Clone)]
pub struct ShardStorageConfig {
    /// Directory that holds this shard's partitions (and its probe file).
    pub data_dir: PathBuf,
    /// Group-commit settings.
    pub flush: FlushConfig,
    /// Memory the batch cache may hold.
    pub cache_bytes_max: usize,
    /// Where the shard's storage metrics go.
    pub metrics: StorageMetrics,
    /// The shard's pool of recycled segment files.
    pub recycle: RecycleConfig,
}

struct ShardInner {
    config: ShardStorageConfig,
    cache: Rc<BatchCache>,
    flusher: FlushScheduler,
    clock: Clock,
    next_log_id: Cell<u64>,
    zero_fill: ZeroFillSlot,
    pool: SegmentPool,
    flush_task: RefCell<Option<Task<()>>>,
}

/// A shard's storage context. Cloning shares it; `!Send`.
#[derive(Clone)]
pub struct ShardStorage {
    inner: Rc<ShardInner>,
}

/// A point in a shard's durable progress; see [`ShardStorage::durable_mark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DurableMark(u64);

impl ShardStorage {
    /// Starts storage on the current shard: creates the data directory, writes and
    /// reads back a non-empty probe file with O_DIRECT ([`probe_device`]), and spawns
    /// the flush loop.
    ///
    /// The probe exists because glommio decides once per device whether polled I/O
    /// works by reading the first DMA file opened there. On a virtio disk an empty file
    /// makes that read succeed vacuously, glommio enables polling, and every later DMA
    /// read fails with EOPNOTSUPP. A real 4 KiB read first gets the right answer.
    pub async fn start(config: ShardStorageConfig, clock: Clock) -> Result<ShardStorage> {
        probe_device(&config.data_dir).await?;
        let zero_fill = ZeroFillSlot::counting(config.metrics.written_zeros.clone());
        let pool = SegmentPool::open(
            &config.data_dir,
            config.recycle,
            config.metrics.recycled_segments.clone(),
            zero_fill.clone(),
        )
        .await?;
        let flusher = FlushScheduler::with_metrics(config.flush, config.metrics.clone());
        let task = glommio::spawn_local(flusher.clone().run());
        Ok(ShardStorage {
            inner: Rc::new(ShardInner {
                cache: Rc::new(BatchCache::with_metrics(
                    config.cache_bytes_max,
                    config.metrics.clone(),
                )),
                config,
                flusher,
                clock,
                next_log_id: Cell::new(1),
                zero_fill,
                pool,
                flush_task: RefCell::new(Some(task)),
            }),
        })
    }

    /// Opens (creating if needed) the partition log in `dir` on this shard.
    pub async fn open_log(
        &self,
        dir: &Path,
        config: LogConfig,
    ) -> Result<(PartitionLog, Vec<RecoveryReport>)> {
        let env = LogEnv {
            id: self.next_log_id(),
            flusher: self.inner.flusher.clone(),
            cache: Rc::clone(&self.inner.cache),
            clock: self.inner.clock.clone(),
            zero_fill: self.inner.zero_fill.clone(),
            pool: self.inner.pool.clone(),
            metrics: self.inner.config.metrics.clone(),
        };
        PartitionLog::open(env, dir, config).await
    }

    /// The shard's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.inner.config.data_dir
    }

    /// The shard's batch cache.
    pub fn cache(&self) -> Rc<BatchCache> {
        Rc::clone(&self.inner.cache)
    }

    /// The shard's group-commit scheduler.
    pub fn flusher(&self) -> &FlushScheduler {
        &self.inner.flusher
    }

    /// How far this shard's durability has progressed: a mark that moves with every
    /// group commit. Readers take a mark, look, and wait with [`Self::durable_after`].
    pub fn durable_mark(&self) -> DurableMark {
        DurableMark(self.inner.flusher.rounds())
    }

    /// Resolves once a group commit after `mark` has completed, so high watermarks may
    /// have moved (long-polling fetches look again). Dropping it unregisters its waker.
    pub fn durable_after(&self, mark: DurableMark) -> RoundAfter<'_> {
        self.inner.flusher.round_after(mark.0)
    }

    /// The shard's pool of recycled segment files.
    pub fn pool(&self) -> &SegmentPool {
        &self.inner.pool
    }

    /// The shard's clock.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    fn next_log_id(&self) -> u64 {
        let id = self.inner.next_log_id.get();
        self.inner.next_log_id.set(id + 1);
        id
    }

    /// Stops the flush loop after it has flushed everything queued. Logs must be closed
    /// first if their active segments should be sealed.
    pub async fn shutdown(&self) {
        self.inner.flusher.stop();
        let task = self.inner.flush_task.borrow_mut().take();
        if let Some(task) = task {
            task.await;
        }
    }
}

/// Creates `dir` and makes the current thread's first O_DIRECT read on its device a
/// real one: writes a 4 KiB probe file with ordinary I/O, then reads it back through
/// glommio. Must run on every executor thread before any other DMA file on the device
/// is opened (glommio caches the answer per thread and device); see
/// [`ShardStorage::start`].
pub async fn probe_device(dir: &Path) -> Result<()> {
    let probe = dir.join(PROBE_FILE);
    glommio::executor()
        .spawn_blocking({
            let dir = dir.to_path_buf();
            let probe = probe.clone();
            move || -> Result<()> {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| StorageError::io("create dir", &dir, e))?;
                std::fs::write(&probe, [0x5au8; ALIGN as usize])
                    .map_err(|e| StorageError::io("write", &probe, e))
            }
        })
        .await?;
    let file = open_dma(&probe).await?;
    let read = file
        .read_at_aligned(0, ALIGN as usize)
        .await
        .map_err(|e| StorageError::io("probe read", &probe, e))?;
    if read.len() != ALIGN as usize || read.iter().any(|&b| b != 0x5a) {
        return Err(StorageError::Corrupt {
            path: probe,
            position: 0,
            detail: "probe file did not read back as written".into(),
        });
    }
    Ok(())
}
