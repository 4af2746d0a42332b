//! A shard's pool of recycled segment log files.
//!
//! Deleting a segment frees its blocks, and on a file system mounted with online discard
//! (`-o discard`) ext4 trims them at its next journal commit: the device stalls for
//! hundreds of milliseconds and every durable produce waits (measured: p99.9 from ~15 ms
//! to 130–650 ms one to four times in ten minutes of a soak with retention). Growing a
//! new segment's file costs again: zeros written ahead of the data (see
//! [`super::zero_fill`]) double the bytes the device writes. So a segment that retention
//! or DeleteRecords removes keeps its log file, renamed `<stale_below>.recycled` in its
//! partition's directory (its two small index files are deleted), and the partition's
//! next segment takes it (renamed to its own name) and overwrites it in place:
//! allocated, written blocks, no trim, no zero-fill, and a group commit's fdatasync
//! stays a bare device flush. In steady state a partition's retention frees about one
//! segment per segment it rolls, so its own files are enough.
//!
//! Stale bytes are never data. A recycled file's name records `stale_below`: one past
//! the highest offset any batch in it can carry (its last segment's next offset; by
//! induction every earlier life's offsets are lower still). A file only goes to a new
//! segment of the same partition whose base offset is at least that — so every stale
//! batch fails recovery's rule that a batch's base offset continues the offsets before
//! it, and recovery ends the log at the first stale byte as it ends it at a torn write.
//! (Another partition's offsets are unrelated: partitions that grow in step would put
//! equal offsets at equal positions, which is why files never cross partitions.)
//! Readers never go past a segment's flushed end, and a retired file is only renamed
//! once nobody holds it open, so an in-flight read never sees it overwritten.
//!
//! The shard bounds the bytes its partitions keep ([`RecycleConfig::bytes_max`]); a file
//! that does not fit is moved to `<shard dir>/recycle/` and deleted in steps paced at
//! [`RecycleConfig::delete_rate`] — faster only while more than the bound waits, so
//! deleting always keeps up with retention. Every step is a rename or a removal, made
//! durable by a directory fsync: a crash at any point leaves the segment where it was
//! (retention removes it again), a recycled file (taken in again when the partition
//! opens), or a file queued for deletion (deleted after the next start).

use std::{
    cell::{Cell, RefCell},
    path::{Path, PathBuf},
    rc::Rc,
    time::Duration,
};

use glommio::io::{Directory, DmaFile};
use prometheus_client::metrics::counter::Counter;

use super::{
    failpoint,
    segment_appender::align_down,
    segment_files::{remove_if_present, sync_dir, SegmentPaths},
    Offset, Result, StorageError,
};

/// Where a shard's files waiting for deletion go, under its storage directory.
pub const POOL_DIR: &str = "recycle";

/// Suffix of a recycled log file in a partition directory.
pub const RECYCLED_SUFFIX: &str = ".recycled";

/// Suffix of a file waiting to be deleted.
const DOOMED_SUFFIX: &str = ".delete";

/// A file handed to a segment may exceed its segment size by this much (its last batch
/// and the zero-fill step ahead of it): more would be trimmed, all at once, when the
/// segment seals.
const OVERSIZE_BYTES: u64 = 8 << 20;

/// How long a retired segment's file may stay open elsewhere (a read in flight, its
/// sealing) before it is deleted rather than recycled.
const HELD_WAIT: Duration = Duration::from_secs(10);

/// Deletions stop pausing only while more than this (or the pool's bound, if larger)
/// waits: with recycling off, a few segments queued are still deleted paced.
const BACKLOG_MIN: u64 = 1 << 30;

/// Bytes freed per step of a paced deletion.
const DELETE_STEP_BYTES: u64 = 1 << 20;

/// Settings of a shard's segment pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecycleConfig {
    /// Bytes of retired log files the shard's partitions keep for reuse; 0 turns
    /// recycling off (deleted segments are then deleted, still paced).
    pub bytes_max: u64,
    /// Bytes per second freed when a file is deleted rather than kept, while no more
    /// than `bytes_max` (at least 1 GiB) waits for deletion (beyond, as fast as the
    /// device takes it).
    pub delete_rate: u64,
}

impl Default for RecycleConfig {
    fn default() -> RecycleConfig {
        RecycleConfig {
            // Four default-sized segments: a partition's retention may free a few of its
            // segments at once (a retention.bytes lowered) that its next rolls then take.
            bytes_max: 4 << 30,
            // ext4 trims freed blocks at its journal commit (every 5 s): 8 MiB/s keeps a
            // commit's trim to ~40 MiB, which this disk absorbs without a visible stall.
            delete_rate: 8 << 20,
        }
    }
}

/// A recycled log file in a partition directory.
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

    fn dir(&self) -> Option<&Path> {
        self.path.parent()
    }
}

struct PoolInner {
    dir: PathBuf,
    config: RecycleConfig,
    files: RefCell<Vec<Pooled>>,
    next_seq: Cell<u64>,
    doomed: RefCell<Vec<(PathBuf, u64)>>,
    deleting: Cell<bool>,
    recycled: Counter,
}

/// A shard's segment pool (see the module docs). Cloning shares it; `!Send`.
#[derive(Clone)]
pub struct SegmentPool {
    inner: Rc<PoolInner>,
}

fn parse_recycled(name: &str) -> Option<Offset> {
    let stem = name.strip_suffix(RECYCLED_SUFFIX)?;
    (stem.len() == 20).then_some(())?;
    stem.parse().ok().map(Offset)
}

fn file_len(path: &Path) -> Result<Option<u64>> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(m.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StorageError::io("stat", path, e)),
    }
}

impl SegmentPool {
    /// Opens the pool of the shard whose storage directory is `shard_dir`: creates its
    /// deletion directory and queues what a previous run left there. `recycled` counts
    /// the files reused.
    pub async fn open(
        shard_dir: &Path,
        config: RecycleConfig,
        recycled: Counter,
    ) -> Result<SegmentPool> {
        let dir = shard_dir.join(POOL_DIR);
        let doomed = {
            let dir = dir.clone();
            glommio::executor()
                .spawn_blocking(move || -> Result<Vec<(PathBuf, u64)>> {
                    std::fs::create_dir_all(&dir)
                        .map_err(|e| StorageError::io("create dir", &dir, e))?;
                    let mut doomed = Vec::new();
                    for entry in
                        std::fs::read_dir(&dir).map_err(|e| StorageError::io("list", &dir, e))?
                    {
                        let path = entry.map_err(|e| StorageError::io("list", &dir, e))?.path();
                        let bytes = file_len(&path)?.unwrap_or(0);
                        doomed.push((path, bytes));
                    }
                    Ok(doomed)
                })
                .await?
        };
        let pool = SegmentPool {
            inner: Rc::new(PoolInner {
                dir,
                config,
                files: RefCell::new(Vec::new()),
                next_seq: Cell::new(0),
                doomed: RefCell::new(doomed),
                deleting: Cell::new(false),
                recycled,
            }),
        };
        pool.delete_doomed();
        Ok(pool)
    }

    /// Bytes of files kept for reuse, across the shard's partitions.
    pub fn bytes(&self) -> u64 {
        self.inner.files.borrow().iter().map(|f| f.bytes).sum()
    }

    /// Files kept for reuse, across the shard's partitions.
    pub fn files(&self) -> usize {
        self.inner.files.borrow().len()
    }

    #[cfg(test)]
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        self.inner
            .files
            .borrow()
            .iter()
            .map(|f| f.path.clone())
            .collect()
    }

    /// Takes in the recycled files of the partition directory `dir`, as its log opens:
    /// those that fit the bound are kept for its segments, the rest deleted paced.
    pub async fn adopt(&self, dir: &Path) -> Result<()> {
        let owned = dir.to_path_buf();
        let found = glommio::executor()
            .spawn_blocking(move || -> Result<Vec<Pooled>> {
                let mut found = Vec::new();
                let entries = match std::fs::read_dir(&owned) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
                    Err(e) => return Err(StorageError::io("list", &owned, e)),
                };
                for entry in entries {
                    let entry = entry.map_err(|e| StorageError::io("list", &owned, e))?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if let Some(stale_below) = parse_recycled(&name) {
                        let path = entry.path();
                        if let Some(bytes) = file_len(&path)? {
                            found.push(Pooled {
                                path,
                                stale_below,
                                bytes,
                            });
                        }
                    }
                }
                Ok(found)
            })
            .await?;
        for file in found {
            if self.bytes() + file.bytes <= self.inner.config.bytes_max {
                self.inner.files.borrow_mut().push(file);
            } else {
                self.doom(file.path, file.bytes).await?;
            }
        }
        Ok(())
    }

    /// Forgets the files of partition directory `dir` (its log closed or was deleted;
    /// [`adopt`](Self::adopt) takes them in again when it opens).
    pub fn forget(&self, dir: &Path) {
        self.inner
            .files
            .borrow_mut()
            .retain(|f| f.dir() != Some(dir));
    }

    /// Takes the files of a segment that was just removed from its log: deletes its
    /// index files, then — once nobody else holds `log_file` — keeps its log as a
    /// recycled file of its partition when the shard's bound allows, or deletes it
    /// paced. `stale_below` is the segment's next offset; `log_file` its open log,
    /// `None` on a retry after a failure (it was waited for then); `dir` the partition's
    /// open directory (and its path), synced before a kept file can be taken — through io_uring, as a
    /// device flush on the blocking pool would hold up a roll's rename there, and with
    /// it the partition's appends. Fails only on an I/O error (the
    /// files then stay where they are, which a reopened log treats as a segment
    /// retention has yet to delete).
    pub async fn retire(
        &self,
        paths: SegmentPaths,
        log_file: Option<Rc<DmaFile>>,
        stale_below: Offset,
        (dir, dir_path): (&Directory, &Path),
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
        let kept_path = paths
            .log
            .with_file_name(format!("{:020}{RECYCLED_SUFFIX}", stale_below.0));
        let room = self.inner.config.bytes_max.saturating_sub(self.bytes());
        // Failpoints are per thread: looked up here, injected on the blocking pool.
        let fail_remove = failpoint::check("recycle remove indexes");
        let fail_rename = failpoint::check("recycle rename log");
        let kept = glommio::executor()
            .spawn_blocking(move || -> Result<Option<(PathBuf, u64, bool)>> {
                if let Some(e) = fail_remove {
                    return Err(StorageError::io("remove", &paths.index, e));
                }
                remove_if_present(&paths.index)?;
                remove_if_present(&paths.time_index)?;
                let Some(bytes) = file_len(&paths.log)? else {
                    return Ok(None);
                };
                let keep = recyclable && bytes > 0 && bytes <= room;
                if !keep {
                    return Ok(Some((paths.log, bytes, false)));
                }
                if let Some(e) = fail_rename {
                    return Err(StorageError::io("rename", &paths.log, e));
                }
                std::fs::rename(&paths.log, &kept_path)
                    .map_err(|e| StorageError::io("rename", &paths.log, e))?;
                Ok(Some((kept_path, bytes, true)))
            })
            .await?;
        sync_dir(dir, dir_path).await?;
        match kept {
            Some((path, bytes, true)) => self.inner.files.borrow_mut().push(Pooled {
                path,
                stale_below,
                bytes,
            }),
            Some((path, bytes, false)) => self.doom(path, bytes).await?,
            None => {}
        }
        Ok(())
    }

    /// Takes a file for a new segment of the partition in `dir` based at `base` that
    /// grows to at most `segment_bytes`: the largest of the partition's files whose
    /// stale batches all lie below `base` and that is not much larger than the segment
    /// will grow. `None` when there is none.
    pub fn take(&self, dir: &Path, base: Offset, segment_bytes: u64) -> Option<Pooled> {
        let mut files = self.inner.files.borrow_mut();
        let i = files
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f.dir() == Some(dir)
                    && f.stale_below <= base
                    && f.bytes <= segment_bytes + OVERSIZE_BYTES
            })
            .max_by_key(|(_, f)| f.bytes)
            .map(|(i, _)| i)?;
        Some(files.swap_remove(i))
    }

    /// Renames `file` (from [`take`](Self::take)) to `to`, a new segment's log path in
    /// the same directory. The rename is not yet durable (a group commit's fdatasync of
    /// an overwrite commits no directory entry): the round that makes the new
    /// segment's first appends durable fdatasyncs the directory, for it and the
    /// segment's new index files (see [`super::segment::Segment::create`]).
    pub async fn claim(&self, file: &Pooled, to: &Path) -> Result<()> {
        let (from, to) = (file.path.clone(), to.to_path_buf());
        let fail = failpoint::check("recycle claim");
        glommio::executor()
            .spawn_blocking(move || {
                if let Some(e) = fail {
                    return Err(StorageError::io("rename", &from, e));
                }
                std::fs::rename(&from, &to).map_err(|e| StorageError::io("rename", &from, e))
            })
            .await?;
        self.inner.recycled.inc();
        Ok(())
    }

    /// Moves `path` (`bytes` long) to the shard's deletion directory and queues it for
    /// paced deletion.
    async fn doom(&self, path: PathBuf, bytes: u64) -> Result<()> {
        let seq = self.inner.next_seq.get();
        self.inner.next_seq.set(seq + 1);
        let to = self
            .inner
            .dir
            .join(format!("{}-{seq}{DOOMED_SUFFIX}", std::process::id()));
        let moved = to.clone();
        glommio::executor()
            .spawn_blocking(move || {
                std::fs::rename(&path, &moved).map_err(|e| StorageError::io("rename", &path, e))
            })
            .await?;
        self.inner.doomed.borrow_mut().push((to, bytes));
        self.delete_doomed();
        Ok(())
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
                let Some((path, _)) = next else { break };
                let backlog = Rc::clone(&inner);
                let behind = move || {
                    backlog.doomed.borrow().iter().map(|(_, b)| b).sum::<u64>()
                        > backlog.config.bytes_max.max(BACKLOG_MIN)
                };
                if let Err(e) = delete_paced(&path, inner.config.delete_rate, behind).await {
                    tracing::warn!(path = %path.display(), error = %e, "cannot delete a retired segment file; the next start retries");
                }
            }
            inner.deleting.set(false);
        })
        .detach();
    }
}

/// Deletes `path` by shrinking it [`DELETE_STEP_BYTES`] at a time at `rate` bytes per
/// second (0: at once) — without pausing while `behind` says the deletions fall behind
/// — then unlinking it. Each step is a short call on the blocking pool.
pub async fn delete_paced(path: &Path, rate: u64, behind: impl Fn() -> bool) -> Result<()> {
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
            if !behind() {
                glommio::timer::sleep(pause).await;
            }
        }
    }
    let owned = path.to_path_buf();
    blocking
        .spawn_blocking(move || remove_if_present(&owned))
        .await
}
