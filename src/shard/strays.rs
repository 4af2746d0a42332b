//! Partition directories nobody holds any more: left by a topic deleted, or a replica
//! moved elsewhere, while this host was away (a host that is up deletes those as they
//! go). Shard 0 sweeps the host's data directory once, shortly after it starts: a
//! directory whose `partition.metadata` names a topic id that no current partition
//! with a replica on this host has is deleted. Unmarked directories (written before the
//! marker) and ones that fail to read are left alone: deleting records on a guess is
//! never right.

use std::path::{Path, PathBuf};

use super::context::ShardContext;
use crate::{
    metadata::placement::host_of,
    storage::partition_log::{topic_id_in, PARTITION_METADATA_FILE},
};

/// A partition directory: its topic, partition and the topic id it is marked with.
struct Marked {
    dir: PathBuf,
    topic: String,
    partition: u32,
    topic_id: [u8; 16],
}

/// Deletes the host's stray partition directories (see the module docs); returns how
/// many went.
pub async fn sweep(ctx: &ShardContext) -> usize {
    let root = ctx.config.data_dir.clone();
    let marked = match glommio::executor()
        .spawn_blocking(move || marked_dirs(&root))
        .await
    {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list partition directories");
            return 0;
        }
    };
    let snapshot = ctx.metadata();
    let mut swept = 0;
    for m in marked {
        let host = host_of(ctx.node);
        let held = snapshot.topics.get(&m.topic).is_some_and(|t| {
            t.id == m.topic_id
                && m.partition < t.partitions
                && t.states
                    .get(m.partition as usize)
                    .is_none_or(|s| s.replicas.iter().any(|n| host_of(*n) == host))
        });
        if held || ctx.open_log_of(&m.topic, m.partition).is_some() {
            continue;
        }
        let dir = m.dir.clone();
        let removed = glommio::executor()
            .spawn_blocking(move || std::fs::remove_dir_all(&dir))
            .await;
        match removed {
            Ok(()) => {
                tracing::info!(topic = %m.topic, partition = m.partition, "deleted a partition directory nobody holds (its topic was deleted or its replica moved while this host was away)");
                swept += 1;
            }
            Err(e) => {
                tracing::warn!(topic = %m.topic, partition = m.partition, error = %e, "cannot delete a stray partition directory")
            }
        }
    }
    swept
}

/// Every `<topic>-<partition>` directory under `root` with a readable marker.
fn marked_dirs(root: &Path) -> std::io::Result<Vec<Marked>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((topic, partition)) = name
            .rsplit_once('-')
            .and_then(|(t, p)| Some((t.to_string(), p.parse::<u32>().ok()?)))
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path().join(PARTITION_METADATA_FILE)) else {
            continue;
        };
        if let Some(topic_id) = topic_id_in(&text) {
            out.push(Marked {
                dir: entry.path(),
                topic,
                partition,
                topic_id,
            });
        }
    }
    Ok(out)
}
