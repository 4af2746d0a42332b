//! A partition directory on disk: which segments it holds, and making new files in it
//! survive a crash.

use std::path::Path;

use crate::storage::{Offset, Result, StorageError};

fn parse_segment_name(name: &str) -> Option<Offset> {
    let stem = name.strip_suffix(".log")?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().map(Offset)
}

pub(super) async fn list_segments(dir: &Path) -> Result<Vec<Offset>> {
    let dir = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            std::fs::create_dir_all(&dir).map_err(|e| StorageError::io("create dir", &dir, e))?;
            let mut bases = Vec::new();
            for entry in std::fs::read_dir(&dir).map_err(|e| StorageError::io("list", &dir, e))? {
                let entry = entry.map_err(|e| StorageError::io("list", &dir, e))?;
                if let Some(base) = entry.file_name().to_str().and_then(parse_segment_name) {
                    bases.push(base);
                }
            }
            bases.sort();
            Ok(bases)
        })
        .await
}

/// fsyncs a directory so the files just created in it survive a crash. On the
/// blocking pool: glommio's directory handles fail on relative paths.
pub(super) async fn sync_dir(dir: &Path) -> Result<()> {
    let dir = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || {
            std::fs::File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StorageError::io("fsync dir", &dir, e))
        })
        .await
}
