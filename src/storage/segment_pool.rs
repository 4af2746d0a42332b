//! A shard's pool of recycled segment log files.
//!
//! Deleting a segment frees its blocks, and on a file system mounted with online discard
//! (`-o discard`) ext4 trims them at its next journal commit: the device stalls for
//! hundreds of milliseconds and every durable produce waits (measured: p99.9 from ~15 ms
//! to 130–650 ms one to four times in ten minutes of a soak with retention). Growing a
//! new segment's file costs again: zeros written ahead of the data (see
//! [`super::zero_fill`]) double the bytes the device writes. So a segment that retention
//! or DeleteRecords removes gives its log file to this pool instead (renamed into
//! `<shard dir>/recycle/`; its two small index files are deleted), and the next segment
//! created on the shard takes a file from the pool (renamed to its own name) and
//! overwrites it in place: allocated, written blocks, no trim, no zero-fill, and a
//! group commit's fdatasync stays a bare device flush.
//!
//! Stale bytes are never data. A pooled file's name records `stale_below`: one past the
//! highest offset any batch in it can carry (its last segment's next offset; by
//! induction every earlier life's offsets are lower still). A file is only given to a
//! segment whose base offset is at least that, so every stale batch fails recovery's
//! rule that a batch's base offset continues the offsets before it, and recovery ends the
//! log at the first stale byte as it ends it at a torn write. Readers never go past a
//! segment's flushed end. A retired file is only renamed once nobody holds it open, so an
//! in-flight read never sees it overwritten.
//!
//! The pool is bounded ([`RecycleConfig::bytes_max`]); a file that does not fit is
//! deleted in steps paced at [`RecycleConfig::delete_rate`], so the device never sees a
//! burst of discards. Every step is a rename or a removal: a crash at any point leaves
//! either the segment in its partition directory (retention removes it again), or the
//! file in the pool, or a file queued for deletion that the next start deletes.

use std::{
    cell::{Cell, RefCell},
    path::{Path, PathBuf},
    rc::Rc,
    time::Duration,
};

use glommio::io::DmaFile;
use prometheus_client::metrics::counter::Counter;

use super::{
    failpoint, segment_appender::align_down, segment_files::SegmentPaths, Offset, Result,
    StorageError,
};

/// The pool's directory under a shard's storage directory.
pub const POOL_DIR: &str = "recycle";

/// Suffix of a pooled file waiting to be deleted.
const DOOMED_SUFFIX: &str = ".delete";

/// A file handed to a segment may exceed its segment size by this much (its last batch
/// and the zero-fill step ahead of it): more would be trimmed, all at once, when the
/// segment seals.
const OVERSIZE_BYTES: u64 = 8 << 20;

/// How long a retired segment's file may stay open elsewhere (a read in flight, its
/// sealing) before it is deleted rather than recycled.
const HELD_WAIT: Duration = Duration::from_secs(10);

/// Bytes freed per step of a paced deletion.
const DELETE_STEP_BYTES: u64 = 1 << 20;

/// Settings of a shard's segment pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecycleConfig {
    /// Bytes of retired log files kept for reuse; 0 turns recycling off (deleted
    /// segments are then deleted, still paced).
    pub bytes_max: u64,
    /// Bytes per second freed when a file is deleted rather than kept.
    pub delete_rate: u64,
}

impl Default for RecycleConfig {
    fn default() -> RecycleConfig {
        RecycleConfig {
            // Two default-sized segments: enough for a shard whose partitions roll and
            // expire at a steady pace to reuse every file, without holding much disk
            // that retention was asked to free.
            bytes_max: 2 << 30,
            // ext4 trims freed blocks at its journal commit (every 5 s): 8 MiB/s keeps a
            // commit's trim to ~40 MiB, which this disk absorbs without a visible stall.
            delete_rate: 8 << 20,
        }
    }
}

/// A log file in the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pooled {
    path: PathBuf,
    /// Every batch in the file has offsets below this.
    stale_below: Offset,
    /// The file's length.
    bytes: u64,
}

impl Pooled {
    /// Bytes of the file that a new segment overwrites in place: whole pages below its
    /// end (a write reaching past the end would change the file's size).
    pub fn prewritten(&self) -> u64 {
        align_down(self.bytes)
    }
}

struct PoolInner {
    dir: PathBuf,
    config: RecycleConfig,
    files: RefCell<Vec<Pooled>>,
    next_seq: Cell<u64>,
    doomed: RefCell<Vec<PathBuf>>,
    deleting: Cell<bool>,
    recycled: Counter,
}

/// A shard's segment pool (see the module docs). Cloning shares it; `!Send`.
#[derive(Clone)]
pub struct SegmentPool {
    inner: Rc<PoolInner>,
}

fn parse_pooled(name: &str) -> Option<(u64, Offset)> {
    let stem = name.strip_suffix(".log")?;
    let (seq, stale) = stem.split_once('-')?;
    Some((seq.parse().ok()?, Offset(stale.parse().ok()?)))
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StorageError::io("remove", path, e)),
    }
}

fn sync_dir_blocking(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io("fsync dir", dir, e))
}

impl SegmentPool {
    /// Opens the pool under `shard_dir`: creates its directory, takes in the files a
    /// previous run left there (newest first while they fit), and queues the rest and
    /// any half-deleted ones for paced deletion. `recycled` counts the files reused.
    pub async fn open(
        shard_dir: &Path,
        config: RecycleConfig,
        recycled: Counter,
    ) -> Result<SegmentPool> {
        let dir = shard_dir.join(POOL_DIR);
        let listed = {
            let dir = dir.clone();
            glommio::executor()
                .spawn_blocking(move || -> Result<_> {
                    std::fs::create_dir_all(&dir)
                        .map_err(|e| StorageError::io("create dir", &dir, e))?;
                    let mut pooled = Vec::new();
                    let mut doomed = Vec::new();
                    for entry in
                        std::fs::read_dir(&dir).map_err(|e| StorageError::io("list", &dir, e))?
                    {
                        let entry = entry.map_err(|e| StorageError::io("list", &dir, e))?;
                        let path = entry.path();
                        let name = entry.file_name().to_string_lossy().into_owned();
                        match parse_pooled(&name) {
                            Some((seq, stale_below)) => {
                                let bytes = entry
                                    .metadata()
                                    .map_err(|e| StorageError::io("stat", &path, e))?
                                    .len();
                                pooled.push((
                                    seq,
                                    Pooled {
                                        path,
                                        stale_below,
                                        bytes,
                                    },
                                ));
                            }
                            None => doomed.push(path),
                        }
                    }
                    Ok((pooled, doomed))
                })
                .await?
        };
        let (mut pooled, doomed) = listed;
        pooled.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
        let next_seq = pooled.first().map_or(0, |(seq, _)| seq + 1);
        let pool = SegmentPool {
            inner: Rc::new(PoolInner {
                dir,
                config,
                files: RefCell::new(Vec::new()),
                next_seq: Cell::new(next_seq),
                doomed: RefCell::new(doomed),
                deleting: Cell::new(false),
                recycled,
            }),
        };
        let mut kept = 0u64;
        for (_, file) in pooled {
            if kept + file.bytes <= config.bytes_max {
                kept += file.bytes;
                pool.inner.files.borrow_mut().push(file);
            } else {
                pool.inner.doomed.borrow_mut().push(file.path);
            }
        }
        pool.delete_doomed();
        Ok(pool)
    }

    /// Bytes of files in the pool, ready for reuse.
    pub fn bytes(&self) -> u64 {
        self.inner.files.borrow().iter().map(|f| f.bytes).sum()
    }

    /// Files in the pool, ready for reuse.
    pub fn files(&self) -> usize {
        self.inner.files.borrow().len()
    }

    /// Files waiting for (or in) paced deletion.
    pub fn doomed(&self) -> usize {
        self.inner.doomed.borrow().len() + usize::from(self.inner.deleting.get())
    }

    /// Takes the files of a segment that was just removed from its log: deletes its
    /// index files, then — once nobody else holds `log_file` — moves its log into the
    /// pool when it fits, or deletes it paced when it does not. `stale_below` is the
    /// segment's next offset. Fails only on an I/O error (the files then stay where
    /// they are, which a reopened log treats as a segment retention has yet to delete).
    ///
    /// `log_file` is the segment's open log, `None` on a retry after a failure (it was
    /// waited for then).
    pub async fn retire(
        &self,
        paths: SegmentPaths,
        log_file: Option<Rc<DmaFile>>,
        stale_below: Offset,
    ) -> Result<()> {
        let mut recyclable = true;
        if let Some(log_file) = log_file {
            let mut held = Duration::ZERO;
            while Rc::strong_count(&log_file) > 1 && held < HELD_WAIT {
                glommio::timer::sleep(Duration::from_millis(10)).await;
                held += Duration::from_millis(10);
            }
            // Still held (a read stuck for seconds): its fd keeps a deleted inode readable.
            recyclable = Rc::strong_count(&log_file) == 1;
        }
        let seq = self.inner.next_seq.get();
        self.inner.next_seq.set(seq + 1);
        let pooled_path = self
            .inner
            .dir
            .join(format!("{seq:020}-{:020}.log", stale_below.0));
        let doomed_path = self.inner.dir.join(format!("{seq:020}{DOOMED_SUFFIX}"));
        let room = self.inner.config.bytes_max.saturating_sub(self.bytes());
        let dir = self.inner.dir.clone();
        // Failpoints are per thread: looked up here, injected on the blocking pool.
        let fail_remove = failpoint::check("recycle remove indexes");
        let fail_rename = failpoint::check("recycle rename log");
        let moved = glommio::executor()
            .spawn_blocking(move || -> Result<Option<(PathBuf, Option<u64>)>> {
                if let Some(e) = fail_remove {
                    return Err(StorageError::io("remove", &paths.index, e));
                }
                remove_if_present(&paths.index)?;
                remove_if_present(&paths.time_index)?;
                let bytes = match std::fs::metadata(&paths.log) {
                    Ok(m) => m.len(),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(StorageError::io("stat", &paths.log, e)),
                };
                let keep = recyclable && bytes > 0 && bytes <= room;
                let to = if keep { pooled_path } else { doomed_path };
                if let Some(e) = fail_rename {
                    return Err(StorageError::io("rename", &paths.log, e));
                }
                std::fs::rename(&paths.log, &to)
                    .map_err(|e| StorageError::io("rename", &paths.log, e))?;
                sync_dir_blocking(&dir)?;
                Ok(Some((to, keep.then_some(bytes))))
            })
            .await?;
        let Some((to, kept)) = moved else {
            return Ok(());
        };
        match kept {
            Some(bytes) => self.inner.files.borrow_mut().push(Pooled {
                path: to,
                stale_below,
                bytes,
            }),
            None => {
                self.inner.doomed.borrow_mut().push(to);
                self.delete_doomed();
            }
        }
        Ok(())
    }

    /// Takes a file for a new segment based at `base` of at most `segment_bytes`: the
    /// largest one whose stale batches all lie below `base` and that is not much larger
    /// than the segment will grow. `None` when there is none.
    pub fn take(&self, base: Offset, segment_bytes: u64) -> Option<Pooled> {
        let mut files = self.inner.files.borrow_mut();
        let i = files
            .iter()
            .enumerate()
            .filter(|(_, f)| f.stale_below <= base && f.bytes <= segment_bytes + OVERSIZE_BYTES)
            .max_by_key(|(_, f)| f.bytes)
            .map(|(i, _)| i)?;
        self.inner.recycled.inc();
        Some(files.swap_remove(i))
    }

    /// Renames `file` (from [`take`](Self::take)) to `to`, a new segment's log path, and
    /// makes the rename durable in both directories before the segment takes appends:
    /// a group commit's fdatasync of an overwrite commits no directory entry.
    pub async fn claim(&self, file: &Pooled, to: &Path) -> Result<()> {
        let (from, to) = (file.path.clone(), to.to_path_buf());
        let pool_dir = self.inner.dir.clone();
        let fail = failpoint::check("recycle claim");
        glommio::executor()
            .spawn_blocking(move || {
                if let Some(e) = fail {
                    return Err(StorageError::io("rename", &from, e));
                }
                std::fs::rename(&from, &to).map_err(|e| StorageError::io("rename", &from, e))?;
                if let Some(parent) = to.parent() {
                    sync_dir_blocking(parent)?;
                }
                sync_dir_blocking(&pool_dir)
            })
            .await
    }

    /// Starts the paced deleter when files wait and it is not running.
    fn delete_doomed(&self) {
        if self.inner.deleting.get() || self.inner.doomed.borrow().is_empty() {
            return;
        }
        self.inner.deleting.set(true);
        let inner = Rc::clone(&self.inner);
        glommio::spawn_local(async move {
            loop {
                let next = inner.doomed.borrow_mut().pop();
                let Some(path) = next else { break };
                if let Err(e) = delete_paced(&path, inner.config.delete_rate).await {
                    tracing::warn!(path = %path.display(), error = %e, "cannot delete a retired segment file; the next start retries");
                }
            }
            inner.deleting.set(false);
        })
        .detach();
    }
}

/// Deletes `path` by shrinking it [`DELETE_STEP_BYTES`] at a time at `rate` bytes per
/// second (0: at once), then unlinking it. Each step is a short call on the blocking
/// pool.
pub async fn delete_paced(path: &Path, rate: u64) -> Result<()> {
    let blocking = glommio::executor();
    let owned = path.to_path_buf();
    let opened = blocking
        .spawn_blocking(move || {
            let file = match std::fs::OpenOptions::new().write(true).open(&owned) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(StorageError::io("open", &owned, e)),
            };
            let len = file
                .metadata()
                .map_err(|e| StorageError::io("stat", &owned, e))?
                .len();
            Ok(Some((file, len)))
        })
        .await?;
    if let Some((mut file, mut len)) = opened.filter(|_| rate > 0) {
        let pause = Duration::from_secs_f64(DELETE_STEP_BYTES as f64 / rate as f64);
        while len > DELETE_STEP_BYTES {
            len -= DELETE_STEP_BYTES;
            let owned = path.to_path_buf();
            file = blocking
                .spawn_blocking(move || match file.set_len(len) {
                    Ok(()) => Ok(file),
                    Err(e) => Err(StorageError::io("truncate", &owned, e)),
                })
                .await?;
            glommio::timer::sleep(pause).await;
        }
    }
    let owned = path.to_path_buf();
    blocking
        .spawn_blocking(move || remove_if_present(&owned))
        .await
}
