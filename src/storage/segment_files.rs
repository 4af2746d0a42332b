//! A segment's files on disk: their names, and opening them for O_DIRECT I/O.

use std::{
    path::{Path, PathBuf},
    rc::Rc,
};

use glommio::io::{Directory, DmaFile, OpenOptions};

use super::{error::IntoOsError, Offset, Result, StorageError};

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

/// Renames `from` to `to`. Blocking: call on the blocking pool.
pub(crate) fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| StorageError::io("rename", from, e))
}

/// Renames `from` to `to`; a `from` that is not there is fine. Blocking: call on the
/// blocking pool.
pub(crate) fn rename_if_present(from: &Path, to: &Path) -> Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(StorageError::io("rename", from, e))
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
