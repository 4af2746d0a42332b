//! A shard's pool of recycled segment files.
//!
//! Deleting a segment frees its blocks, and on a file system mounted with online discard
//! (`-o discard`) ext4 trims them at its next journal commit: the device stalls for
//! hundreds of milliseconds and every durable produce waits (measured: p99.9 from ~15 ms
//! to 130–650 ms one to four times in ten minutes of a soak with retention). Growing a
//! new segment's file costs again: zeros written ahead of the data (see
//! [`super::zero_fill`]) double the bytes the device writes. So a segment that retention
//! or DeleteRecords removes keeps its files, renamed `<stale_below>.recycled` (the log),
//! `<stale_below>.recycled-index` and `<stale_below>.recycled-timeindex` in its
//! partition's directory, and the partition's next segment takes them (renamed to its
//! own names) and overwrites them in place: allocated, written blocks, no trim, no
//! zero-fill, and a group commit's fdatasync stays a bare device flush. In steady state
//! a partition's retention frees about one segment per segment it rolls, so its own
//! files are enough.
//!
//! Stale bytes are never data. A recycled log's name records `stale_below`: one past
//! the highest offset any batch in it can carry (its last segment's next offset; by
//! induction every earlier life's offsets are lower still). A log only goes to a new
//! segment of the same partition whose base offset is at least that — so every stale
//! batch fails recovery's rule that a batch's base offset continues the offsets before
//! it, and recovery ends the log at the first stale byte as it ends it at a torn write.
//! (Another partition's offsets are unrelated: partitions that grow in step would put
//! equal offsets at equal positions, which is why files never cross partitions.)
//! Readers never go past a segment's flushed end, and a retired file is only renamed
//! once nobody holds it open, so an in-flight read never sees it overwritten.
//! Index entries carry no such proof (a stale entry can look in order and in range, and
//! index writes are not fdatasynced, so after a power loss a page of them can read as
//! it was in any earlier life). So a retired segment's index files are overwritten with
//! zeros and fdatasynced before they are renamed into the pool: in any later life a page
//! reads as that life's entries or as zeros, which end an index as they do in a new file.
//! That costs the index's size in writes (0.5% of the log's at the default interval)
//! instead of a trim and a new allocation per index file.
//!
//! The shard bounds the bytes its partitions keep ([`RecycleConfig::bytes_max`]); a file
//! that does not fit is moved to `<shard dir>/recycle/` and deleted in steps paced at
//! [`RecycleConfig::delete_rate`] — faster only while more than the bound waits, so
//! deleting always keeps up with retention. Every step is a rename or a removal, made
//! durable by a directory fsync: a crash at any point leaves the segment where it was
//! (retention removes it again; zeroed index files read as empty and recovery rebuilds
//! them from its log), recycled files (taken in again when the partition opens; index
//! files without their log are deleted then), or a file queued for deletion (deleted
//! after the next start).

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
    segment_appender::{align_down, align_up},
    segment_files::{
        open_dma_if_present, remove_if_present, rename, rename_if_present, sync_dir, SegmentPaths,
    },
    zero_fill::{zero_fill, ZeroFillSlot},
    Offset, Result, StorageError,
};

/// Where a shard's files waiting for deletion go, under its storage directory.
pub const POOL_DIR: &str = "recycle";

/// Suffix of a recycled log file in a partition directory.
pub const RECYCLED_SUFFIX: &str = ".recycled";

/// Suffixes of a recycled log's zeroed index files, after its stem.
const RECYCLED_INDEX_SUFFIXES: [&str; 2] = [".recycled-index", ".recycled-timeindex"];

/// The names a segment's files take in the pool of directory `dir`.
fn recycled_paths(dir: &Path, stale_below: Offset) -> SegmentPaths {
    let stem = format!("{:020}", stale_below.0);
    let [index, time_index] = RECYCLED_INDEX_SUFFIXES;
    SegmentPaths {
        log: dir.join(format!("{stem}{RECYCLED_SUFFIX}")),
        index: dir.join(format!("{stem}{index}")),
        time_index: dir.join(format!("{stem}{time_index}")),
    }
}

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

/// A recycled log file in a partition directory, and beside it its zeroed index files
/// when they were kept too.
#[derive(Debug, Clone)]
pub struct Pooled {
    paths: SegmentPaths,
    /// Every batch in the file has offsets below this.
    stale_below: Offset,
    /// The log's length.
    bytes: u64,
}

impl Pooled {
    /// Bytes of the file that a new segment overwrites in place: whole pages below its
    /// end (a write reaching past the end would change the file's size).
    pub fn prewritten(&self) -> u64 {
        align_down(self.bytes)
    }

    fn dir(&self) -> Option<&Path> {
        self.paths.log.parent()
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
    zero_fill: ZeroFillSlot,
}

/// A shard's segment pool (see the module docs). Cloning shares it; `!Send`.
#[derive(Clone)]
pub struct SegmentPool {
    inner: Rc<PoolInner>,
}

/// The `stale_below` of a recycled file's name, and whether it is an index file.
fn parse_recycled(name: &str) -> Option<(Offset, bool)> {
    let (stem, index) = match name.strip_suffix(RECYCLED_SUFFIX) {
        Some(stem) => (stem, false),
        None => (
            RECYCLED_INDEX_SUFFIXES
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))?,
            true,
        ),
    };
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())).then_some(())?;
    stem.parse().ok().map(|o| (Offset(o), index))
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
    /// the files reused; `zero_fill` is the shard's, through which retired index files
    /// are zeroed (and counted).
    pub async fn open(
        shard_dir: &Path,
        config: RecycleConfig,
        recycled: Counter,
        zero_fill: ZeroFillSlot,
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
                zero_fill,
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
            .map(|f| f.paths.log.clone())
            .collect()
    }

    /// Takes in the recycled files of the partition directory `dir`, as its log opens:
    /// those that fit the bound are kept for its segments, the rest deleted paced.
    /// Index files whose log is not there (a crash stopped a retire or a claim between
    /// renames) are deleted.
    pub async fn adopt(&self, dir: &Path) -> Result<()> {
        let owned = dir.to_path_buf();
        let found = glommio::executor()
            .spawn_blocking(move || -> Result<Vec<Pooled>> {
                let mut logs = Vec::new();
                let mut indexes = Vec::new();
                let entries = match std::fs::read_dir(&owned) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(logs),
                    Err(e) => return Err(StorageError::io("list", &owned, e)),
                };
                for entry in entries {
                    let entry = entry.map_err(|e| StorageError::io("list", &owned, e))?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    match parse_recycled(&name) {
                        Some((stale_below, false)) => {
                            let paths = recycled_paths(&owned, stale_below);
                            if let Some(bytes) = file_len(&paths.log)? {
                                logs.push(Pooled {
                                    paths,
                                    stale_below,
                                    bytes,
                                });
                            }
                        }
                        Some((stale_below, true)) => indexes.push((stale_below, entry.path())),
                        None => {}
                    }
                }
                for (stale_below, path) in indexes {
                    if !logs.iter().any(|l| l.stale_below == stale_below) {
                        remove_if_present(&path)?;
                    }
                }
                Ok(logs)
            })
            .await?;
        for file in found {
            if self.bytes() + file.bytes <= self.inner.config.bytes_max {
                self.inner.files.borrow_mut().push(file);
            } else {
                self.discard(file).await?;
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

    /// Takes the files of a segment that was just removed from its log: once nobody
    /// else holds `log_file`, keeps them as recycled files of its partition (the index
    /// files zeroed first) when the shard's bound allows, or deletes them (the log
    /// paced). `stale_below` is the segment's next offset; `log_file` its open log,
    /// `None` on a retry after a failure (it was waited for then); `dir` the partition's
    /// open directory (and its path), synced before a kept file can be taken — through
    /// io_uring, as a device flush on the blocking pool would hold up a roll's rename
    /// there, and with it the partition's appends. Fails only on an I/O error (the
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
        let log = paths.log.clone();
        let bytes = glommio::executor()
            .spawn_blocking(move || file_len(&log))
            .await?;
        let room = self.inner.config.bytes_max.saturating_sub(self.bytes());
        let keep = recyclable && bytes.is_some_and(|b| b > 0 && b <= room);
        let kept = recycled_paths(dir_path, stale_below);
        // Zeroed and durable before they are renamed: up to the renames the segment
        // keeps index files that read as empty, which recovery rebuilds from its log.
        let indexes = keep && self.zero_indexes(&paths).await?;
        // Failpoints are per thread: looked up here, injected on the blocking pool.
        let fail_move = failpoint::check("recycle move indexes");
        let fail_rename = failpoint::check("recycle rename log");
        let moved = {
            let (paths, kept) = (paths.clone(), kept.clone());
            glommio::executor()
                .spawn_blocking(move || -> Result<()> {
                    if let Some(e) = fail_move {
                        return Err(StorageError::io("rename", &paths.index, e));
                    }
                    if indexes {
                        rename(&paths.index, &kept.index)?;
                        rename(&paths.time_index, &kept.time_index)?;
                    } else {
                        remove_if_present(&paths.index)?;
                        remove_if_present(&paths.time_index)?;
                    }
                    if keep {
                        if let Some(e) = fail_rename {
                            return Err(StorageError::io("rename", &paths.log, e));
                        }
                        rename(&paths.log, &kept.log)?;
                    }
                    Ok(())
                })
                .await
        };
        moved?;
        sync_dir(dir, dir_path).await?;
        match bytes {
            Some(bytes) if keep => self.inner.files.borrow_mut().push(Pooled {
                paths: kept,
                stale_below,
                bytes,
            }),
            Some(bytes) => self.doom(paths.log, bytes).await?,
            None => {}
        }
        Ok(())
    }

    /// Overwrites the segment's two index files with zeros and fdatasyncs them (see the
    /// module docs). False when one of them is missing: a segment whose indexes were
    /// lost keeps none.
    async fn zero_indexes(&self, paths: &SegmentPaths) -> Result<bool> {
        if let Some(e) = failpoint::check("recycle zero indexes") {
            return Err(StorageError::io("write", &paths.index, e));
        }
        let slot = &self.inner.zero_fill;
        let (index, time_index) = futures_lite::future::zip(
            zero_whole_file(&paths.index, slot),
            zero_whole_file(&paths.time_index, slot),
        )
        .await;
        Ok(index?.is_some() && time_index?.is_some())
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

    /// Renames `file` (from [`take`](Self::take)) to `to`, a new segment's paths in the
    /// same directory: its log, and its zeroed index files when they are there (else
    /// the segment starts index files of its own). The renames
    /// are not yet durable (a group commit's fdatasync of an overwrite commits no
    /// directory entry): the round that makes the new segment's first appends durable
    /// fdatasyncs the directory (see [`super::segment::Segment::create`]). A crash
    /// before then leaves each file under its old name or its new one, and a zeroed
    /// index file reads as empty under either.
    pub async fn claim(&self, file: &Pooled, to: &SegmentPaths) -> Result<()> {
        let (from, to) = (file.paths.clone(), to.clone());
        let fail = failpoint::check("recycle claim");
        glommio::executor()
            .spawn_blocking(move || {
                if let Some(e) = fail {
                    return Err(StorageError::io("rename", &from.log, e));
                }
                rename(&from.log, &to.log)?;
                rename_if_present(&from.index, &to.index)?;
                rename_if_present(&from.time_index, &to.time_index)
            })
            .await?;
        self.inner.recycled.inc();
        Ok(())
    }

    /// Deletes a pooled file that does not fit the bound: its small index files at
    /// once, its log paced.
    async fn discard(&self, file: Pooled) -> Result<()> {
        let paths = file.paths.clone();
        glommio::executor()
            .spawn_blocking(move || {
                remove_if_present(&paths.index)?;
                remove_if_present(&paths.time_index)
            })
            .await?;
        self.doom(file.paths.log, file.bytes).await
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
            .spawn_blocking(move || rename(&path, &moved))
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

/// Overwrites the whole of `path` with zeros, in whole pages (a partial last page is
/// padded, so the file ends on a page boundary), and fdatasyncs it: once this returns,
/// no crash can bring its earlier contents back. Returns its new length, or `None` when
/// there is no such file.
pub(super) async fn zero_whole_file(
    path: &std::path::Path,
    slot: &ZeroFillSlot,
) -> Result<Option<u64>> {
    let Some(file) = open_dma_if_present(path, true).await? else {
        return Ok(None);
    };
    let len = align_up(
        file.file_size()
            .await
            .map_err(|e| StorageError::io("stat", path, e))?,
    );
    if len > 0 {
        // No data follows: every piece is urgent, so it goes in one write.
        zero_fill(&file, path, 0, len as usize, &Cell::new(0), slot).await?;
    }
    file.close()
        .await
        .map_err(|e| StorageError::io("close", path, e))?;
    Ok(Some(len))
}
