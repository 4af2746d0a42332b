//! A segment's files on disk: their names, and opening them for O_DIRECT I/O.

use std::{
    path::{Path, PathBuf},
    rc::Rc,
};

use glommio::io::{Directory, DmaFile, OpenOptions};

use super::{error::IntoOsError, segment_appender::align_up, Offset, Result, StorageError};

/// Bytes of zeros one write of [`zero_file`] carries.
const ZERO_STEP_BYTES: u64 = 256 << 10;

/// Paths of a segment's three files.
#[derive(Debug, Clone)]
pub struct SegmentPaths {
    /// The batches.
    pub log: PathBuf,
    /// Offset index.
    pub index: PathBuf,
    /// Time index.
    pub time_index: PathBuf,
}

impl SegmentPaths {
    /// The files of the segment with `base` in `dir`, named by the 20-digit base offset.
    pub fn new(dir: &Path, base: Offset) -> SegmentPaths {
        let stem = format!("{:020}", base.0);
        SegmentPaths {
            log: dir.join(format!("{stem}.log")),
            index: dir.join(format!("{stem}.index")),
            time_index: dir.join(format!("{stem}.timeindex")),
        }
    }
}

/// Opens (creating if missing) a file for O_DIRECT reading and writing.
pub async fn open_dma(path: &Path) -> Result<Rc<DmaFile>> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .dma_open(path)
        .await
        .map(Rc::new)
        .map_err(|e| StorageError::io("open", path, e))
}

/// Opens an existing file for O_DIRECT reading (and writing, when `write`); `None` when
/// there is no such file.
pub(crate) async fn open_dma_if_present(path: &Path, write: bool) -> Result<Option<DmaFile>> {
    match OpenOptions::new()
        .read(true)
        .write(write)
        .dma_open(path)
        .await
    {
        Ok(file) => Ok(Some(file)),
        Err(e) => {
            let e = e.into_os_error();
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(None);
            }
            Err(StorageError::io("open", path, e))
        }
    }
}

/// Opens a directory for [`Directory::sync`] through io_uring (made absolute first:
/// glommio opens directories relative to no working directory).
pub(crate) async fn open_dir(dir: &Path) -> Result<Rc<Directory>> {
    let absolute = std::path::absolute(dir).map_err(|e| StorageError::io("open dir", dir, e))?;
    Directory::open(&absolute)
        .await
        .map(Rc::new)
        .map_err(|e| StorageError::io("open dir", dir, e))
}

/// Removes `path`; one that is already gone is fine. Blocking: call on the blocking pool.
pub(crate) fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(StorageError::io("remove", path, e))
        }
        _ => Ok(()),
    }
}

/// fsyncs directory `dir`, so the names just created, renamed or removed in it survive
/// a crash. Blocking: call on the blocking pool.
pub(crate) fn sync_dir_blocking(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io("fsync dir", dir, e))
}

/// fdatasyncs the directory `handle` (opened by [`open_dir`] on `dir`) through
/// io_uring: makes the entries created, renamed or removed in it durable (ext4 and XFS
/// write a directory's entries on fdatasync).
pub(crate) async fn sync_dir(handle: &Directory, dir: &Path) -> Result<()> {
    handle
        .sync()
        .await
        .map_err(|e| StorageError::io("fsync dir", dir, e))
}

/// Overwrites the whole of `path` with zeros through O_DIRECT, in whole pages (a partial
/// last page is padded, so the file ends on a page boundary), and fdatasyncs it: once
/// this returns, no crash can bring its earlier contents back. Returns its new length,
/// or `None` when there is no such file.
pub(crate) async fn zero_file(path: &Path) -> Result<Option<u64>> {
    let Some(file) = open_dma_if_present(path, true).await? else {
        return Ok(None);
    };
    let len = align_up(
        file.file_size()
            .await
            .map_err(|e| StorageError::io("stat", path, e))?,
    );
    let mut at = 0;
    while at < len {
        let step = ZERO_STEP_BYTES.min(len - at);
        let mut zeros = file.alloc_dma_buffer(step as usize);
        zeros.as_bytes_mut().fill(0);
        let written = file
            .write_at(zeros, at)
            .await
            .map_err(|e| StorageError::io("write", path, e))?;
        if written as u64 != step {
            return Err(StorageError::io(
                "write",
                path,
                std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    format!("{written} of {step} bytes of zeros written at {at}"),
                ),
            ));
        }
        at += step;
    }
    file.fdatasync()
        .await
        .map_err(|e| StorageError::io("fdatasync", path, e))?;
    file.close()
        .await
        .map_err(|e| StorageError::io("close", path, e))?;
    Ok(Some(len))
}
