//! Where each leader epoch begins in a partition's log (Kafka's leader-epoch cache and
//! its `leader-epoch-checkpoint`): what OffsetForLeaderEpoch and a follower's
//! diverging-epoch check answer from. Kept in memory, written to `leader-epochs.json`
//! in the partition's directory whenever an epoch begins or the log is cut, and
//! completed on open from the batch headers of the log's tail.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::PartitionLog;
use crate::storage::{segment_files::sync_dir_blocking, Offset, Result, StorageError};

/// The checkpoint file in a partition's directory.
pub const EPOCHS_FILE: &str = "leader-epochs.json";

/// Leader epochs and their first offsets, both ascending.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderEpochs {
    entries: Vec<(i32, Offset)>,
}

/// Where an epoch ends, as OffsetForLeaderEpoch answers: the largest epoch at or below
/// the one asked about, and the offset after its last record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEnd {
    /// The epoch found.
    pub epoch: i32,
    /// One past its last offset.
    pub end_offset: Offset,
}

impl LeaderEpochs {
    /// The newest epoch in the log.
    pub fn latest(&self) -> Option<i32> {
        self.entries.last().map(|(e, _)| *e)
    }

    /// Notes that `epoch` begins at `start`, when it is newer than every epoch known.
    /// True when it was.
    pub fn observe(&mut self, epoch: i32, start: Offset) -> bool {
        if epoch < 0 || self.latest().is_some_and(|e| e >= epoch) {
            return false;
        }
        self.entries.push((epoch, start));
        true
    }

    /// Where `epoch` ends in a log ending at `log_end`, as Kafka's leader-epoch cache
    /// answers: the newest epoch ends at the log end; an older one at the start of the
    /// next epoch, reported as the largest known epoch at or below it (or as itself when
    /// it is older than every known epoch). `None` for an epoch newer than every known
    /// one (or when none is known).
    pub fn end_of(&self, epoch: i32, log_end: Offset) -> Option<EpochEnd> {
        if self.latest() == Some(epoch) {
            return Some(EpochEnd {
                epoch,
                end_offset: log_end,
            });
        }
        let at = self.entries.partition_point(|(e, _)| *e <= epoch);
        let (_, end_offset) = *self.entries.get(at)?;
        let found = at
            .checked_sub(1)
            .map_or(epoch, |below| self.entries[below].0);
        Some(EpochEnd {
            epoch: found,
            end_offset,
        })
    }

    /// Forgets the epochs that begin at or after `offset` (the log was cut there).
    pub fn truncate_from(&mut self, offset: Offset) {
        self.entries.retain(|(_, start)| *start < offset);
    }
}

impl PartitionLog {
    /// Reads the checkpoint, keeping the epochs that begin inside the log.
    pub(super) async fn load_epochs(&self) -> Result<()> {
        let path = self.shared.dir.join(EPOCHS_FILE);
        let read = glommio::executor()
            .spawn_blocking(move || match std::fs::read(&path) {
                Ok(bytes) => Ok(serde_json::from_slice::<LeaderEpochs>(&bytes).ok()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(StorageError::io("read", &path, e)),
            })
            .await?;
        let mut st = self.shared.state.borrow_mut();
        if let Some(mut epochs) = read {
            epochs.truncate_from(st.log_end);
            st.epochs = epochs;
        }
        Ok(())
    }

    /// Writes the epoch table durably (temporary file, fdatasync, rename, directory
    /// fsync), off the reactor.
    pub(super) async fn save_epochs(&self, epochs: LeaderEpochs) -> Result<()> {
        let dir = self.shared.dir.clone();
        glommio::executor()
            .spawn_blocking(move || write_epochs(&dir, &epochs))
            .await
    }

    /// Writes the epoch table as it is now (after the log was cut and reopened).
    pub async fn checkpoint_epochs(&self) -> Result<()> {
        self.save_epochs(self.leader_epochs()).await
    }

    /// The leader epochs as this replica knows them.
    pub fn leader_epochs(&self) -> LeaderEpochs {
        self.shared.state.borrow().epochs.clone()
    }

    /// Where `epoch` ends in this log (see [`LeaderEpochs::end_of`]).
    pub fn epoch_end(&self, epoch: i32) -> Option<EpochEnd> {
        let st = self.shared.state.borrow();
        st.epochs.end_of(epoch, st.log_end)
    }
}

fn write_epochs(dir: &Path, epochs: &LeaderEpochs) -> Result<()> {
    use std::io::Write;
    let path = dir.join(EPOCHS_FILE);
    let tmp = dir.join(format!("{EPOCHS_FILE}.tmp"));
    let bytes = serde_json::to_vec(epochs)
        .map_err(|e| StorageError::io("encode", &path, std::io::Error::other(e)))?;
    let mut file = std::fs::File::create(&tmp).map_err(|e| StorageError::io("create", &tmp, e))?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_data())
        .map_err(|e| StorageError::io("write", &tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| StorageError::io("rename", &path, e))?;
    sync_dir_blocking(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_ends_where_the_next_begins() {
        let mut e = LeaderEpochs::default();
        assert!(e.observe(0, Offset(0)));
        assert!(e.observe(3, Offset(10)));
        assert!(!e.observe(2, Offset(12)), "older epochs are ignored");
        assert!(e.observe(5, Offset(20)));
        let end = |epoch| {
            e.end_of(epoch, Offset(25))
                .map(|x| (x.epoch, x.end_offset.0))
        };
        assert_eq!(end(0), Some((0, 10)));
        assert_eq!(end(2), Some((0, 10)), "the largest epoch at or below");
        assert_eq!(end(3), Some((3, 20)));
        assert_eq!(end(5), Some((5, 25)), "the newest ends at the log end");
        assert_eq!(end(9), None, "newer than any known");
        assert_eq!(end(-1), Some((-1, 0)), "older than any known");
        e.truncate_from(Offset(20));
        assert_eq!(e.latest(), Some(3));
        let cut = e.end_of(3, Offset(18)).map(|x| x.end_offset);
        assert_eq!(cut, Some(Offset(18)));
    }
}
