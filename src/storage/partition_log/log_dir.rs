//! A partition directory on disk: which topic it belongs to, which segments it holds,
//! and making new files in it survive a crash.

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

/// The file naming the topic a partition directory belongs to (Kafka's
/// `partition.metadata`, KIP-516): directories are named `<topic>-<partition>`, and a
/// topic deleted while a host was away and created again under the same name must not
/// find the old one's records there.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// What [`claim_dir`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The directory is this topic's (or was new, or predates the file: now it is).
    Ours,
    /// It held an earlier topic of the same name: it was deleted and started afresh.
    Replaced,
}

/// Makes `dir` the directory of partition of topic `topic_id`: an unmarked or missing
/// one is marked (the file written, fsynced, renamed, the directory fsynced); one
/// marked with another topic id is deleted first. Call before opening the log in it.
pub async fn claim_dir(dir: &Path, topic_id: [u8; 16]) -> Result<Claim> {
    let dir = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || claim_dir_blocking(&dir, topic_id))
        .await
}

fn claim_dir_blocking(dir: &Path, topic_id: [u8; 16]) -> Result<Claim> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let ours = format!(
        "version: 0\ntopic_id: {}\n",
        uuid::Uuid::from_bytes(topic_id)
    );
    let claim = match std::fs::read_to_string(&path) {
        Ok(text) => match topic_id_in(&text) {
            Some(id) if id == topic_id => return Ok(Claim::Ours),
            Some(_) => {
                std::fs::remove_dir_all(dir).map_err(|e| StorageError::io("remove dir", dir, e))?;
                Claim::Replaced
            }
            // Never delete records on a file this cannot read.
            None => {
                return Err(StorageError::Corrupt {
                    path,
                    position: 0,
                    detail: format!("no topic_id line in {text:?}"),
                })
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Claim::Ours,
        Err(e) => return Err(StorageError::io("read", &path, e)),
    };
    std::fs::create_dir_all(dir).map_err(|e| StorageError::io("create dir", dir, e))?;
    let tmp = dir.join(format!("{PARTITION_METADATA_FILE}.tmp"));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(ours.as_bytes())?;
        f.sync_data()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| StorageError::io("write", &path, e))?;
    Ok(claim)
}

/// The topic id a `partition.metadata` file names, if it names one.
pub fn topic_id_in(text: &str) -> Option<[u8; 16]> {
    let value = text.lines().find_map(|l| l.strip_prefix("topic_id:"))?;
    uuid::Uuid::parse_str(value.trim())
        .ok()
        .map(|u| *u.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_support::{run, test_dir};

    #[test]
    fn a_directory_of_an_earlier_topic_of_the_same_name_is_started_afresh() {
        let root = test_dir();
        let dir = root.path().join("orders-0");
        run(async move {
            assert_eq!(claim_dir(&dir, [1; 16]).await.expect("claim"), Claim::Ours);
            std::fs::write(dir.join("00000000000000000000.log"), b"old").expect("write");
            assert_eq!(claim_dir(&dir, [1; 16]).await.expect("again"), Claim::Ours);
            assert!(dir.join("00000000000000000000.log").exists(), "kept");
            assert_eq!(
                claim_dir(&dir, [2; 16]).await.expect("new"),
                Claim::Replaced
            );
            assert!(
                !dir.join("00000000000000000000.log").exists(),
                "old records gone"
            );
            assert_eq!(claim_dir(&dir, [2; 16]).await.expect("same"), Claim::Ours);
            std::fs::write(dir.join(PARTITION_METADATA_FILE), b"garbage").expect("write");
            assert!(claim_dir(&dir, [3; 16]).await.is_err(), "unreadable: kept");
            assert!(dir.exists());
        });
    }
}
