//! A single host's log of transaction states: what a cluster's journal partitions are
//! to its coordinators, one log per shard (`<data>/shard-N/transaction-states`). Every
//! change a coordinator makes is appended to it as a journal record and is durable
//! once the shard's group commit has written it — in the same round, and the same
//! device flush, as the data it orders — so a transaction's state changes take no
//! fdatasync of their own. LMDB is the queryable view of the logs: changes reach it
//! unsynced, in the state writer's rounds.
//!
//! A start applies every shard's log to LMDB, syncs it and deletes the logs before any
//! shard serves ([`adopt`]); each shard then begins a new log. So an id's records are
//! in one log only, whichever shard coordinated it before (the shard count may change
//! between starts, and a cluster host journals elsewhere), and no two logs' records
//! need ordering against each other.
//!
//! A log does not grow without bound: once it holds a sealed segment, a checkpoint
//! holds off changes until those in flight are in LMDB, syncs LMDB, and moves the log
//! start to the high watermark, so whole segments go and a replay reads only what came
//! after. A crash between the sync and the move replays records LMDB already holds,
//! which leaves the same state: a record is an id's whole state.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use crate::group::{
    journal::{self, Journal, JournalError},
    offset_store::OffsetStore,
};
use crate::storage::{
    config::{CleanupPolicy, LogConfig},
    Clock, FlushConfig, ShardStorage, ShardStorageConfig,
};

/// The directory of a shard's transaction-state log, inside the shard's directory.
pub const STATE_LOG_DIR: &str = "transaction-states";

/// Segment size: a checkpoint frees a segment at a time, and a replay reads at most
/// about two.
const SEGMENT_BYTES: u64 = 32 << 20;

/// A shard's transaction-state log: a journal whose log is the shard's own (epoch 0:
/// it has no leader to change). `!Send`.
pub struct StateLog {
    journal: Journal,
}

impl StateLog {
    /// Opens (creating) the log in `<shard dir>/transaction-states` on `storage`.
    pub async fn open(storage: &ShardStorage) -> Result<StateLog, JournalError> {
        StateLog::open_with(storage, log_config(SEGMENT_BYTES)).await
    }

    async fn open_with(
        storage: &ShardStorage,
        config: LogConfig,
    ) -> Result<StateLog, JournalError> {
        let dir = storage.data_dir().join(STATE_LOG_DIR);
        let (log, _) = storage.open_log(&dir, config).await?;
        Ok(StateLog {
            journal: Journal {
                log,
                epoch: 0,
                gate: Default::default(),
            },
        })
    }

    /// Applies every record the log holds to `store` and syncs it; returns how many.
    pub async fn replay(&self, store: &Arc<OffsetStore>) -> Result<usize, JournalError> {
        journal::replay(&self.journal.log, store, |_| false).await
    }

    /// The journal a coordinator appends to.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Checkpoints when the log holds a sealed segment (see the module docs); returns
    /// the log start offset it moved to, if it did.
    pub async fn checkpoint_if_due(
        &self,
        store: &Arc<OffsetStore>,
    ) -> Result<Option<u64>, JournalError> {
        let log = &self.journal.log;
        if log.offsets().segments < 2 {
            return Ok(None);
        }
        // Every change appended so far is in LMDB while this is held.
        let _exclusive = self.journal.gate.exclusive().await?;
        let synced = Arc::clone(store);
        glommio::executor()
            .spawn_blocking(move || synced.sync())
            .await?;
        let to = log.offsets().high_watermark;
        Ok(Some(log.delete_records(to).await?.0))
    }

    /// Makes everything appended durable and closes the log.
    pub async fn close(&self) -> Result<(), JournalError> {
        Ok(self.journal.log.close().await?)
    }
}

/// The settings of a state log: segments of `segment_bytes`, never rolled by age nor
/// deleted by retention (only a checkpoint moves its start).
fn log_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        segment_age_max: None,
        retention_age_max: None,
        retention_bytes_max: None,
        cleanup: CleanupPolicy::Delete,
        ..LogConfig::default()
    }
}

/// The shard directories under `data_dir` that hold a state log.
pub fn existing(data_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(data_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let shard_dir = name
            .strip_prefix("shard-")
            .is_some_and(|n| n.parse::<u32>().is_ok());
        if shard_dir && entry.path().join(STATE_LOG_DIR).is_dir() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// Applies the state logs of `shard_dirs` (see [`existing`]) to `store`, syncs it, and
/// deletes the logs: what they held is then LMDB's alone. Runs its own executor, so
/// call it before the shards start. Returns how many records were applied.
pub fn adopt(shard_dirs: Vec<PathBuf>, store: Arc<OffsetStore>) -> Result<usize, AdoptError> {
    if shard_dirs.is_empty() {
        return Ok(0);
    }
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("weir-adopt-txn-logs")
        .spawn(move || async move {
            let mut applied = 0;
            for dir in shard_dirs {
                applied += adopt_one(&dir, &store)
                    .await
                    .map_err(|source| AdoptError::Log {
                        dir: dir.clone(),
                        source,
                    })?;
            }
            Ok(applied)
        })
        .map_err(|e| AdoptError::Executor(e.to_string()))?
        .join()
        .map_err(|e| AdoptError::Executor(e.to_string()))?
}

async fn adopt_one(shard_dir: &Path, store: &Arc<OffsetStore>) -> Result<usize, JournalError> {
    let storage = ShardStorage::start(
        ShardStorageConfig {
            data_dir: shard_dir.to_path_buf(),
            flush: FlushConfig {
                interval: Duration::ZERO,
                ..FlushConfig::default()
            },
            cache_bytes_max: 1 << 20,
            metrics: Default::default(),
            recycle: Default::default(),
        },
        Clock::System,
    )
    .await?;
    let log = StateLog::open(&storage).await?;
    // The replay syncs LMDB after what it applies.
    let applied = log.replay(store).await?;
    log.close().await?;
    storage.shutdown().await;
    let dir = shard_dir.join(STATE_LOG_DIR);
    glommio::executor()
        .spawn_blocking(move || std::fs::remove_dir_all(&dir))
        .await
        .map_err(|e| JournalError::Malformed(format!("cannot delete an adopted state log: {e}")))?;
    if applied > 0 {
        tracing::info!(dir = %shard_dir.display(), applied, "transaction-state log applied to LMDB");
    }
    Ok(applied)
}

/// Why leftover state logs could not be adopted.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    /// The executor that adopts them could not run.
    #[error("cannot run the executor that adopts transaction-state logs: {0}")]
    Executor(String),
    /// A log could not be read or applied.
    #[error("transaction-state log in {dir}: {source}")]
    Log {
        /// The shard directory that holds it.
        dir: PathBuf,
        /// What went wrong.
        source: JournalError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{
        test_support::{run, start_storage, test_dir},
        Offset,
    };
    use crate::txn::{
        state::{TxnMetadata, TxnState},
        state_writer::{self, tests::store_in, StateWriter, WRITE_DELAY},
        stored::{self, TxnStates},
    };
    use std::rc::Rc;

    fn meta(epoch: i16) -> TxnMetadata {
        state_writer::tests::meta(epoch, TxnState::Ongoing)
    }

    /// Appends a state for each of `ids` at `epoch` and hands it to `writer`, as the
    /// coordinator does.
    async fn change_all(log: &StateLog, writer: &Rc<StateWriter>, ids: &[String], epoch: i16) {
        for id in ids {
            let state = Some(meta(epoch));
            let record = stored::record(id, state.as_ref());
            let pass = log.journal().append(&record).await.expect("append");
            writer.write(id, state, Some(pass));
        }
    }

    #[test]
    fn a_start_replays_what_the_log_holds_into_lmdb() {
        let (data, lmdb) = (test_dir(), test_dir());
        let shard = data.path().to_path_buf();
        let ids: Vec<String> = (0..5).map(|i| format!("id-{i}")).collect();
        let store = store_in(lmdb.path());
        let replayed = Arc::clone(&store);
        run(async move {
            let storage = start_storage(&shard).await;
            let log = StateLog::open(&storage).await.expect("open");
            assert_eq!(log.replay(&store).await.expect("replay"), 0);
            // Logged, never written to LMDB: a crash before the writer's round.
            for id in &ids {
                let record = stored::record(id, Some(&meta(3)));
                drop(log.journal().append(&record).await.expect("append"));
            }
            let forgotten = stored::record("id-0", None);
            drop(log.journal().append(&forgotten).await.expect("append"));
            log.close().await.expect("close");
            storage.shutdown().await;
            assert_eq!(store.transaction("id-1").expect("read"), None);
            let storage = start_storage(&shard).await;
            let log = StateLog::open(&storage).await.expect("reopen");
            assert_eq!(
                log.replay(&store).await.expect("replay"),
                6,
                "every record, in order"
            );
            storage.shutdown().await;
        });
        assert_eq!(
            replayed.transaction("id-0").expect("read"),
            None,
            "forgotten"
        );
        for i in 1..5 {
            assert_eq!(
                replayed
                    .transaction(&format!("id-{i}"))
                    .expect("read")
                    .map(|m| m.producer_epoch),
                Some(3)
            );
        }
    }

    #[test]
    fn a_checkpoint_frees_sealed_segments_and_a_replay_after_it_reads_only_what_followed() {
        let (data, lmdb) = (test_dir(), test_dir());
        let shard = data.path().to_path_buf();
        let store = store_in(lmdb.path());
        let ids: Vec<String> = (0..40).map(|i| format!("txn-{i}")).collect();
        run(async move {
            let storage = start_storage(&shard).await;
            let config = log_config(4096);
            let log = StateLog::open_with(&storage, config.clone())
                .await
                .expect("open");
            assert_eq!(log.checkpoint_if_due(&store).await.expect("none due"), None);
            let writer = StateWriter::new(Arc::clone(&store));
            change_all(&log, &writer, &ids, 1).await;
            assert!(
                log.journal.log.offsets().segments >= 2,
                "{:?}",
                log.journal.log.offsets()
            );
            // Waits for the writer's round (the passes) before it syncs LMDB.
            let start = log.checkpoint_if_due(&store).await.expect("checkpoint");
            assert_eq!(start, Some(ids.len() as u64));
            assert_eq!(log.journal.log.offsets().segments, 1);
            change_all(&log, &writer, &ids[..2], 2).await;
            glommio::timer::sleep(WRITE_DELAY * 3).await;
            log.close().await.expect("close");
            storage.shutdown().await;
            // Only the log's records after the checkpoint are replayed.
            let storage = start_storage(&shard).await;
            let log = StateLog::open_with(&storage, config).await.expect("reopen");
            assert_eq!(log.replay(&store).await.expect("replay"), 2);
            let epochs: Vec<Option<i16>> = ids
                .iter()
                .map(|id| {
                    store
                        .transaction(id)
                        .expect("read")
                        .map(|m| m.producer_epoch)
                })
                .collect();
            assert_eq!(&epochs[..2], &[Some(2), Some(2)]);
            assert!(epochs[2..].iter().all(|e| *e == Some(1)), "{epochs:?}");
            storage.shutdown().await;
        });
    }

    #[test]
    fn a_change_appended_ahead_of_a_partitions_batch_is_durable_once_the_batch_is() {
        let data = test_dir();
        let shard = data.path().to_path_buf();
        run(async move {
            let storage = start_storage(&shard).await;
            let log = StateLog::open(&storage).await.expect("open");
            let (partition, _) = storage
                .open_log(&shard.join("orders-0"), LogConfig::default())
                .await
                .expect("partition");
            for round in 0..50u64 {
                let record = stored::record("ahead", Some(&meta(round as i16)));
                let (_, pass) = log
                    .journal()
                    .append_unwaited(&record)
                    .await
                    .expect("append");
                drop(pass);
                // Some batches are appended while a round is under way.
                if round % 3 == 1 {
                    glommio::executor().yield_task_queue_now().await;
                }
                let batch = journal::encode(&[stored::record("data", None)], 0).expect("batch");
                let appended = partition.append(&batch, 0).await.expect("append");
                appended.durable.await.expect("durable");
                assert!(
                    log.journal.log.offsets().high_watermark > Offset(round),
                    "round {round}: the state log's append is durable with the batch after it"
                );
            }
            storage.shutdown().await;
        });
    }

    #[test]
    fn a_start_applies_every_shards_log_to_lmdb_and_deletes_it() {
        let (data, lmdb) = (test_dir(), test_dir());
        let root = data.path().to_path_buf();
        for shard in ["shard-0", "shard-2"] {
            std::fs::create_dir_all(root.join(shard)).expect("mkdir");
        }
        std::fs::create_dir_all(root.join("orders-0")).expect("mkdir");
        let store = store_in(lmdb.path());
        let dir = root.join("shard-1");
        run(async move {
            let storage = start_storage(&dir).await;
            let log = StateLog::open(&storage).await.expect("open");
            let record = stored::record("left-behind", Some(&meta(5)));
            drop(log.journal().append(&record).await.expect("append"));
            log.close().await.expect("close");
            storage.shutdown().await;
        });
        let logs = existing(&root).expect("list");
        assert_eq!(
            logs,
            vec![root.join("shard-1")],
            "shard-0 and shard-2 have none"
        );
        assert_eq!(adopt(logs, Arc::clone(&store)).expect("adopt"), 1);
        assert_eq!(
            store
                .transaction("left-behind")
                .expect("read")
                .map(|m| m.producer_epoch),
            Some(5)
        );
        assert!(!root.join("shard-1").join(STATE_LOG_DIR).exists());
        assert!(existing(&root).expect("list").is_empty());
    }
}
