//! Appending to a file with O_DIRECT through aligned in-memory chunks.
//!
//! Appends copy bytes into the current chunk, a 4 KiB-aligned [`DmaBuffer`] that mirrors
//! a page-aligned range of the file. Nothing touches the disk until [`begin_flush`]:
//! it seals the chunks filled since the last flush (the partially filled last one is
//! padded with zeros to the next page), and the returned [`FlushWrite`] writes them all
//! concurrently and optionally fdatasyncs. The partially filled tail page is copied into
//! the next chunk, so the next flush rewrites that page with more data: the file never
//! has a hole and never needs a read-modify-write.
//!
//! Durability contract: after [`SegmentAppender::append`] the bytes are in memory only.
//! After a [`FlushWrite::run`] with `sync = true` returns `Ok(end)`, every byte below
//! `end` is on stable storage. Flushes of one appender must not overlap: the caller
//! awaits one before beginning the next (the shard's flush loop does).
//!
//! Write-behind: a chunk that fills up between flushes is written at once, so the disk
//! works while appends continue and a flush is left with the tail and the fdatasync. Two
//! rules keep concurrent writes from ever touching the same page: a chunk that begins
//! with a copied tail page (whose older version the previous flush may still be writing)
//! waits for the next flush instead, and under [`FileGrowth::ZeroFill`] a chunk is
//! written early only inside zeros that are already on disk.
//!
//! Sealed chunks are shared (`Rc`) with the batch cache, so the bytes a flush wrote stay
//! readable from memory without a second copy.
//!
//! [`begin_flush`]: SegmentAppender::begin_flush

use std::{cell::Cell, path::PathBuf, rc::Rc};

use futures_util::future::try_join_all;
use glommio::{
    io::{DmaBuffer, DmaFile},
    Task,
};

pub use super::zero_fill::ZeroFillSlot;
use super::{
    config::FileGrowth,
    failpoint,
    flush::{SyncFile, SyncHandle},
    zero_fill::zero_fill,
    FilePosition, Result, StorageError,
};

/// O_DIRECT alignment used for every position and length written. A multiple of every
/// logical block size Linux supports, and the page size the tail rewrite works in.
pub const ALIGN: u64 = 4096;

/// Smallest chunk allocated; the size adapts to how much arrives between flushes.
const CHUNK_BYTES_MIN: usize = 16 << 10;

/// Rounds `v` down to a multiple of [`ALIGN`].
pub fn align_down(v: u64) -> u64 {
    v & !(ALIGN - 1)
}

/// Rounds `v` up to a multiple of [`ALIGN`].
pub fn align_up(v: u64) -> u64 {
    align_down(v + ALIGN - 1)
}

/// An immutable, written (or being written) range of the file held in memory.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// File position of the chunk's first byte; a multiple of [`ALIGN`].
    pub position: FilePosition,
    /// The bytes; `data.len()` is the aligned write length.
    pub data: Rc<DmaBuffer>,
    /// Bytes of `data` that hold file content; the rest is zero padding.
    pub valid_bytes: usize,
    /// Memory the chunk occupies (its allocation, before trimming).
    pub capacity: usize,
}

impl Chunk {
    /// File position just past the chunk's content.
    pub fn end(&self) -> FilePosition {
        FilePosition(self.position.0 + self.valid_bytes as u64)
    }

    /// The content bytes.
    pub fn content(&self) -> &[u8] {
        &self.data.as_bytes()[..self.valid_bytes]
    }
}

/// Appends to one O_DIRECT file through aligned chunks. See the module docs for the
/// durability contract.
pub struct SegmentAppender {
    file: Rc<DmaFile>,
    path: PathBuf,
    growth: FileGrowth,
    /// The shard's zero-fill slot, which non-urgent zero pieces take turns on.
    zero_fill_slot: ZeroFillSlot,
    chunk: DmaBuffer,
    chunk_capacity: usize,
    chunk_position: u64,
    chunk_len: usize,
    chunk_bytes_max: usize,
    /// Bytes of the current chunk already handed to a flush (the copied tail page).
    chunk_flushed: usize,
    sealed: Vec<Chunk>,
    /// Chunks already being written by write-behind, for the next flush to await.
    behind: Vec<(Chunk, Task<Result<()>>)>,
    /// End of the space that growth operations have been started for.
    allocated_end: u64,
    /// End of the space known to be zeroed on disk (ZeroFill), set by each zero-fill as
    /// it completes. Zero-fills run one at a time, so this only moves forward.
    zeroed_end: Rc<Cell<u64>>,
    /// Growth operations started since the last flush; the flush waits for them before
    /// writing anything that may fall in their range.
    growing: Vec<Task<Result<()>>>,
    /// True while a zero-fill is running.
    zero_filling: Rc<Cell<bool>>,
    /// Set when a zero-fill failed: no further growth starts, and the next flush waits
    /// for (and fails with) the failed task.
    growth_failed: Rc<Cell<bool>>,
    /// End of the data appended so far, for a running zero-fill to see how close the
    /// data is behind it.
    data_end: Rc<Cell<u64>>,
    appended_since_flush: usize,
}

impl SegmentAppender {
    /// Continues appending to `file` whose content is `len` bytes, followed by nothing
    /// or by zeros (the caller cut anything else). Reads the partial tail page back so
    /// the next flush can rewrite it whole.
    pub async fn open(
        file: Rc<DmaFile>,
        path: PathBuf,
        len: u64,
        growth: FileGrowth,
        chunk_bytes_max: usize,
        zero_fill_slot: ZeroFillSlot,
    ) -> Result<SegmentAppender> {
        assert!(
            ALIGN % file.alignment() == 0,
            "device alignment {} does not divide {ALIGN}",
            file.alignment()
        );
        let chunk_position = align_down(len);
        let tail = (len - chunk_position) as usize;
        let chunk_capacity = CHUNK_BYTES_MIN.min(chunk_bytes_max);
        let mut chunk = file.alloc_dma_buffer(chunk_capacity);
        if tail > 0 {
            let read = file
                .read_at_aligned(chunk_position, ALIGN as usize)
                .await
                .map_err(|e| StorageError::io("read tail page", &path, e))?;
            if read.len() < tail {
                return Err(StorageError::Corrupt {
                    path,
                    position: chunk_position,
                    detail: format!("tail page read returned {} of {tail} bytes", read.len()),
                });
            }
            chunk.as_bytes_mut()[..tail].copy_from_slice(&read[..tail]);
        }
        Ok(SegmentAppender {
            file,
            path,
            growth,
            zero_fill_slot,
            chunk,
            chunk_capacity,
            chunk_position,
            chunk_len: tail,
            chunk_bytes_max,
            chunk_flushed: tail,
            sealed: Vec::new(),
            behind: Vec::new(),
            allocated_end: len,
            zeroed_end: Rc::new(Cell::new(len)),
            growing: Vec::new(),
            zero_filling: Rc::new(Cell::new(false)),
            growth_failed: Rc::new(Cell::new(false)),
            data_end: Rc::new(Cell::new(len)),
            appended_since_flush: 0,
        })
    }

    /// Treats the file's bytes below `end` as allocated and written (a recycled file's
    /// stale contents): appends there overwrite in place, so under
    /// [`FileGrowth::ZeroFill`] they are written behind and need no metadata sync, and
    /// zero-fill starts only past `end`. Call right after [`open`](Self::open).
    pub fn assume_written(&mut self, end: u64) {
        let end = align_down(end);
        if end > self.allocated_end {
            self.allocated_end = end;
            self.zeroed_end.set(end);
        }
    }

    /// How far the file is known to be durably written, zeros or data, when the growth
    /// is [`FileGrowth::ZeroFill`] (the only growth that tracks it); `None` otherwise.
    pub fn durably_written_end(&self) -> Option<u64> {
        match self.growth {
            FileGrowth::ZeroFill { .. } => Some(self.zeroed_end.get()),
            FileGrowth::Append | FileGrowth::Fallocate { .. } => None,
        }
    }

    /// [`durably_written_end`](Self::durably_written_end) once every growth started so
    /// far has finished, for a close to record: no zero-fill may still be writing when
    /// it does. Call after the last [`begin_flush`](Self::begin_flush), which hands its
    /// flush the growth the flush's chunks must wait for.
    pub fn settled_written_end(&mut self) -> impl std::future::Future<Output = Option<u64>> {
        let growing = std::mem::take(&mut self.growing);
        let zeroed_end = Rc::clone(&self.zeroed_end);
        let tracked = matches!(self.growth, FileGrowth::ZeroFill { .. });
        async move {
            // A failed zero-fill leaves `zeroed_end` where it was: true either way.
            for task in growing {
                let _ = task.await;
            }
            tracked.then(|| zeroed_end.get())
        }
    }

    /// The file being appended to.
    pub fn file(&self) -> &Rc<DmaFile> {
        &self.file
    }

    /// Logical end of the file: every byte appended so far, flushed or not.
    pub fn end(&self) -> FilePosition {
        FilePosition(self.chunk_position + self.chunk_len as u64)
    }

    /// Bytes appended since the last [`begin_flush`](Self::begin_flush).
    pub fn dirty_bytes(&self) -> usize {
        self.appended_since_flush
    }

    /// True when bytes were appended since the last [`begin_flush`](Self::begin_flush).
    pub fn is_dirty(&self) -> bool {
        !self.sealed.is_empty() || !self.behind.is_empty() || self.chunk_len > self.chunk_flushed
    }

    /// Copies `parts`, in order, to the end of the file's in-memory image. In memory
    /// only until a flush; never fails and never blocks.
    pub fn append(&mut self, parts: &[&[u8]]) {
        for part in parts {
            let mut rest = *part;
            while !rest.is_empty() {
                let room = self.chunk_capacity - self.chunk_len;
                let n = room.min(rest.len());
                self.chunk.as_bytes_mut()[self.chunk_len..self.chunk_len + n]
                    .copy_from_slice(&rest[..n]);
                self.chunk_len += n;
                self.appended_since_flush += n;
                rest = &rest[n..];
                if self.chunk_len == self.chunk_capacity {
                    self.seal_full_chunk();
                }
            }
        }
        self.data_end.set(self.end().0);
    }

    fn seal_full_chunk(&mut self) {
        // Double rather than jump to the maximum: a round that overflows its chunk by a
        // few kilobytes would otherwise hold a 1 MiB buffer for them, in memory and in
        // the batch cache's budget.
        let capacity = (self.chunk_capacity * 2).min(self.chunk_bytes_max);
        let next = self.file.alloc_dma_buffer(capacity);
        let full = std::mem::replace(&mut self.chunk, next);
        let chunk = Chunk {
            position: FilePosition(self.chunk_position),
            data: Rc::new(full),
            valid_bytes: self.chunk_capacity,
            capacity: self.chunk_capacity,
        };
        let overlaps_flushed_tail = self.chunk_flushed > 0;
        let inside_zeros = match self.growth {
            FileGrowth::ZeroFill { .. } => chunk.end().0 <= self.zeroed_end.get(),
            FileGrowth::Append | FileGrowth::Fallocate { .. } => true,
        };
        if overlaps_flushed_tail || !inside_zeros {
            self.sealed.push(chunk);
        } else {
            let write = glommio::spawn_local(write_chunk(
                Rc::clone(&self.file),
                self.path.clone(),
                chunk.clone(),
            ));
            self.behind.push((chunk, write));
        }
        self.chunk_position += self.chunk_capacity as u64;
        self.chunk_capacity = capacity;
        self.chunk_len = 0;
        self.chunk_flushed = 0;
        self.grow_ahead();
    }

    /// Seals everything appended since the last flush and returns the write that puts
    /// it on disk, or `None` when nothing is dirty. The returned chunks may be handed to
    /// the batch cache; they never change again.
    pub fn begin_flush(&mut self) -> Option<FlushWrite> {
        if !self.is_dirty() {
            return None;
        }
        if self.chunk_len > self.chunk_flushed {
            self.seal_partial_chunk();
        }
        self.grow_ahead();
        let behind = std::mem::take(&mut self.behind);
        let writes = std::mem::take(&mut self.sealed);
        let mut chunks: Vec<Chunk> = behind.iter().map(|(c, _)| c.clone()).collect();
        chunks.extend(writes.iter().cloned());
        chunks.sort_by_key(|c| c.position);
        let end = chunks.last().map_or(self.end(), Chunk::end);
        // A flush whose chunks all lie inside zeros already on disk need not wait for the
        // zero-fill running beyond them; a failed zero-fill is handed to the next flush.
        let inside_zeros = matches!(self.growth, FileGrowth::ZeroFill { .. })
            && end.0 <= self.zeroed_end.get()
            && !self.growth_failed.get();
        let growing = if inside_zeros {
            Vec::new()
        } else {
            std::mem::take(&mut self.growing)
        };
        Some(FlushWrite {
            file: Rc::clone(&self.file),
            path: self.path.clone(),
            chunks,
            writes,
            behind: behind.into_iter().map(|(_, task)| task).collect(),
            growing,
            end,
            changes_metadata: !inside_zeros,
        })
    }

    fn seal_partial_chunk(&mut self) {
        let written = align_up(self.chunk_len as u64) as usize;
        self.chunk.as_bytes_mut()[self.chunk_len..written].fill(0);
        let tail_start = align_down(self.chunk_len as u64) as usize;
        let tail = self.chunk_len - tail_start;
        // Size the next chunk for what arrived during this interval, so memory held by
        // the cache tracks the real write rate instead of the maximum chunk size.
        let wanted = (self.appended_since_flush + tail + ALIGN as usize).next_power_of_two();
        let capacity = wanted.clamp(CHUNK_BYTES_MIN, self.chunk_bytes_max);
        let mut next = self.file.alloc_dma_buffer(capacity);
        next.as_bytes_mut()[..tail]
            .copy_from_slice(&self.chunk.as_bytes()[tail_start..self.chunk_len]);
        let mut sealed = std::mem::replace(&mut self.chunk, next);
        sealed.trim_to_size(written);
        self.sealed.push(Chunk {
            position: FilePosition(self.chunk_position),
            data: Rc::new(sealed),
            valid_bytes: self.chunk_len,
            capacity: self.chunk_capacity,
        });
        self.chunk_position += tail_start as u64;
        self.chunk_capacity = capacity;
        self.chunk_len = tail;
        self.chunk_flushed = tail;
        self.appended_since_flush = 0;
    }

    /// Starts the next growth step once appends come within half a step of the space
    /// already grown. Runs ahead of the data, so write-behind finds zeroed space.
    fn grow_ahead(&mut self) {
        let end = align_up(self.end().0);
        match self.growth {
            FileGrowth::Append => {}
            FileGrowth::Fallocate { step_bytes } => {
                if end + step_bytes / 2 <= self.allocated_end {
                    return;
                }
                let target = (end / step_bytes + 1) * step_bytes;
                self.allocated_end = target;
                let (file, path) = (Rc::clone(&self.file), self.path.clone());
                self.growing.push(glommio::spawn_local(async move {
                    file.pre_allocate(target, false)
                        .await
                        .map_err(|e| StorageError::io("fallocate", &path, e))
                }));
            }
            FileGrowth::ZeroFill { step_bytes } => {
                // A whole step ahead, so that at moderate rates the zeros can go out in
                // small pieces long before the data needs them.
                if end + step_bytes <= self.allocated_end
                    || self.zero_filling.get()
                    || self.growth_failed.get()
                {
                    return;
                }
                // The previous zero-fill finished and succeeded: its task is done.
                self.growing.clear();
                // Zeros go strictly beyond every byte appended so far, so they never
                // land on data; later writes into this range wait for them (flushes
                // await `growing`; write-behind checks `zeroed_end`).
                let from = self.allocated_end.max(end);
                self.allocated_end = from + step_bytes;
                self.zero_filling.set(true);
                let (file, path) = (Rc::clone(&self.file), self.path.clone());
                let slot = self.zero_fill_slot.clone();
                let (zeroed_end, zero_filling, failed, data_end) = (
                    Rc::clone(&self.zeroed_end),
                    Rc::clone(&self.zero_filling),
                    Rc::clone(&self.growth_failed),
                    Rc::clone(&self.data_end),
                );
                self.growing.push(glommio::spawn_local(async move {
                    let result =
                        zero_fill(&file, &path, from, step_bytes as usize, &data_end, &slot).await;
                    zero_filling.set(false);
                    failed.set(result.is_err());
                    result?;
                    // Everything below `from` is data appended before this step began
                    // or earlier zeros.
                    zeroed_end.set(from + step_bytes);
                    Ok(())
                }));
            }
        }
    }
}

/// One flush of one file: the sealed chunks, ready to be written, and the write-behind
/// writes to wait for. Holds no borrow of the appender, so appends continue while it
/// runs.
pub struct FlushWrite {
    file: Rc<DmaFile>,
    path: PathBuf,
    chunks: Vec<Chunk>,
    writes: Vec<Chunk>,
    behind: Vec<Task<Result<()>>>,
    growing: Vec<Task<Result<()>>>,
    end: FilePosition,
    changes_metadata: bool,
}

async fn write_chunk(file: Rc<DmaFile>, path: PathBuf, chunk: Chunk) -> Result<()> {
    if let Some(e) = failpoint::check("write") {
        return Err(StorageError::io("write", &path, e));
    }
    let want = chunk.data.len();
    let n = file
        .write_rc_at(Rc::clone(&chunk.data), chunk.position.0)
        .await
        .map_err(|e| StorageError::io("write", &path, e))?;
    StorageError::check_full_write(&path, chunk.position.0, n, want)
}

impl FlushWrite {
    /// The chunks this flush makes durable (written now or by write-behind), in file
    /// order, for the batch cache.
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// Bytes its writes hand the device: its chunks' aligned lengths, so the content
    /// plus the partial pages at either end rewritten or padded.
    pub fn written_bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.data.len() as u64).sum()
    }

    /// File position the file's content reaches once this flush is done.
    pub fn end(&self) -> FilePosition {
        self.end
    }

    /// True when the writes may change the file's metadata (its size or block
    /// allocation): they reach past the zeros known to be durable on disk, or the file
    /// does not grow by zero-filling. Such a write needs its own file's fdatasync; one
    /// that only overwrites durable zeros needs just the device's cache flushed.
    pub fn changes_metadata(&self) -> bool {
        self.changes_metadata
    }

    /// The file written, for the round's fdatasync.
    pub fn sync_file(&self) -> SyncFile {
        SyncFile {
            handle: SyncHandle::File(Rc::clone(&self.file)),
            path: self.path.clone(),
        }
    }

    /// Writes every chunk concurrently and waits for the write-behind ones, then
    /// fdatasyncs when `sync`. Returns the end position, durable when `sync` was set.
    /// Fails with the first I/O error or short write; the caller must then treat the
    /// file's tail as unknown (fail-stop).
    pub async fn run(self, sync: bool) -> Result<FilePosition> {
        let path = &self.path;
        let file = &self.file;
        // Growth started before this flush may cover where its chunks go: wait for it.
        try_join_all(self.growing).await?;
        let writes = self
            .writes
            .iter()
            .map(|chunk| write_chunk(Rc::clone(file), path.clone(), chunk.clone()));
        let (written, behind) =
            futures_lite::future::zip(try_join_all(writes), try_join_all(self.behind)).await;
        written?;
        behind?;
        if sync {
            if let Some(e) = failpoint::check("fdatasync") {
                return Err(StorageError::io("fdatasync", path, e));
            }
            file.fdatasync()
                .await
                .map_err(|e| StorageError::io("fdatasync", path, e))?;
        }
        Ok(self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_support::{run, test_dir};
    use glommio::io::OpenOptions;

    async fn open_new(path: &std::path::Path, growth: FileGrowth) -> SegmentAppender {
        open_new_with_chunks(path, growth, 64 << 10).await
    }

    async fn open_new_with_chunks(
        path: &std::path::Path,
        growth: FileGrowth,
        chunk_bytes_max: usize,
    ) -> SegmentAppender {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .dma_open(path)
            .await
            .expect("open");
        SegmentAppender::open(
            Rc::new(file),
            path.to_path_buf(),
            0,
            growth,
            chunk_bytes_max,
            ZeroFillSlot::new(),
        )
        .await
        .expect("appender")
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn flushed_bytes_read_back_exactly_across_chunks_and_tail_rewrites() {
        for growth in [
            FileGrowth::Append,
            FileGrowth::Fallocate {
                step_bytes: 1 << 20,
            },
            FileGrowth::ZeroFill {
                step_bytes: 256 << 10,
            },
        ] {
            let dir = test_dir();
            let path = dir.path().join("f.log");
            run(async move {
                let mut a = open_new(&path, growth).await;
                let mut expected = Vec::new();
                for (i, len) in [100usize, 5000, 70_000, 1, 4095, 200_000, 3]
                    .iter()
                    .enumerate()
                {
                    let data = pattern(*len, i as u8);
                    a.append(&[&data]);
                    expected.extend_from_slice(&data);
                    let w = a.begin_flush().expect("dirty");
                    assert_eq!(w.end().0, expected.len() as u64);
                    w.run(true).await.expect("flush");
                    assert!(!a.is_dirty());
                }
                let read = a.file().read_at(0, expected.len()).await.expect("read");
                assert_eq!(&read[..], &expected[..], "{growth:?}");
            });
        }
    }

    #[test]
    fn a_round_that_overflows_its_chunk_gets_one_twice_as_large_not_the_largest() {
        let dir = test_dir();
        let path = dir.path().join("f.log");
        run(async move {
            let mut a = open_new_with_chunks(&path, FileGrowth::Append, 1 << 20).await;
            a.append(&[&pattern(20_000, 1)]);
            let w = a.begin_flush().expect("dirty");
            let capacities: Vec<usize> = w.chunks().iter().map(|c| c.capacity).collect();
            assert_eq!(capacities, [CHUNK_BYTES_MIN, 2 * CHUNK_BYTES_MIN]);
            w.run(true).await.expect("flush");
            a.append(&[&pattern(100_000, 2)]);
            let w = a.begin_flush().expect("dirty");
            let capacities: Vec<usize> = w.chunks().iter().map(|c| c.capacity).collect();
            assert_eq!(
                capacities,
                [32 << 10, 64 << 10, 128 << 10],
                "sized for the last round, then doubling"
            );
            w.run(true).await.expect("flush");
        });
    }

    #[test]
    fn reopening_continues_after_an_unaligned_end() {
        let dir = test_dir();
        let path = dir.path().join("f.log");
        run(async move {
            let mut a = open_new(&path, FileGrowth::Append).await;
            let first = pattern(6000, 1);
            a.append(&[&first]);
            a.begin_flush()
                .expect("dirty")
                .run(true)
                .await
                .expect("flush");
            let file = Rc::clone(a.file());
            drop(a);
            file.truncate(6000).await.expect("truncate");
            let mut b = SegmentAppender::open(
                file,
                path.clone(),
                6000,
                FileGrowth::Append,
                64 << 10,
                ZeroFillSlot::new(),
            )
            .await
            .expect("reopen");
            assert_eq!(b.end().0, 6000);
            assert!(b.begin_flush().is_none(), "nothing new to flush");
            let second = pattern(3000, 2);
            b.append(&[&second]);
            b.begin_flush()
                .expect("dirty")
                .run(true)
                .await
                .expect("flush");
            let read = b.file().read_at(0, 9000).await.expect("read");
            assert_eq!(&read[..6000], &first[..]);
            assert_eq!(&read[6000..9000], &second[..]);
        });
    }

    #[test]
    fn alignment_helpers() {
        assert_eq!(align_down(4097), 4096);
        assert_eq!(align_up(4097), 8192);
        assert_eq!(align_up(4096), 4096);
        assert_eq!(align_up(0), 0);
    }
}
