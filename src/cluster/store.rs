//! The controller's durable state in one LMDB environment (`controller/` in the data
//! directory): the Raft log (entries by index), the vote and commit point, and the
//! state machine — the applied [`ClusterState`] with its log position and membership,
//! written as one value per applied batch, which doubles as the snapshot. LMDB commits
//! are synchronous (fsync), so what openraft is told is stored survives a crash.
//!
//! Values are JSON: openraft's types come with serde, the metadata is small (a few KiB
//! per thousand topics) and rare, and a human can read it with `mdb_dump`.

// openraft's StorageError is what its traits return; boxing it here would only move the
// size to a conversion at every call.
#![allow(clippy::result_large_err)]

use std::{
    fmt::Debug,
    io::Cursor,
    ops::{Bound, RangeBounds},
    path::Path,
    sync::Arc,
};

use heed::{
    byteorder::BigEndian,
    types::{Bytes, Str, U64},
    Database, Env, EnvOpenOptions,
};
use openraft::{
    storage::{LogFlushed, RaftLogStorage, RaftStateMachine},
    AnyError, BasicNode, Entry, EntryPayload, LogId, LogState, OptionalSend, RaftLogReader,
    RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError, StorageIOError, StoredMembership,
    Vote,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use super::TypeConfig;
use crate::metadata::cluster_state::{ClusterState, MetadataError};

type NodeId = u64;
type Result<T> = std::result::Result<T, StorageError<NodeId>>;

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "purged";
const APPLIED: &str = "applied";
const SNAPSHOT: &str = "snapshot";

/// The metadata as of a log position: what the state machine holds and what a snapshot
/// carries.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Applied {
    /// The last entry applied.
    pub last_log_id: Option<LogId<NodeId>>,
    /// The membership as of that entry.
    pub membership: StoredMembership<NodeId, BasicNode>,
    /// The metadata.
    pub state: ClusterState,
}

impl Applied {
    /// The log index of the last entry applied: the metadata's version.
    pub fn version(&self) -> u64 {
        self.last_log_id.map_or(0, |l| l.index)
    }
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    data: Vec<u8>,
}

/// The environment and its two databases; cheap to clone.
#[derive(Clone)]
pub struct Store {
    env: Env,
    log: Database<U64<BigEndian>, Bytes>,
    meta: Database<Str, Bytes>,
}

fn io(e: impl std::error::Error + 'static) -> AnyError {
    AnyError::new(&e)
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::read(io(e)).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::write(io(e)).into()
}

impl Store {
    /// Opens (creating) the store in `dir`. Blocking.
    pub fn open(dir: &Path) -> std::result::Result<Store, heed::Error> {
        std::fs::create_dir_all(dir)?;
        let mut options = EnvOpenOptions::new();
        options.map_size(1 << 30).max_dbs(2);
        // SAFETY: the environment is opened once per process, with default (synchronous)
        // durability.
        let env = unsafe { options.open(dir) }?;
        let mut txn = env.write_txn()?;
        let log = env.create_database(&mut txn, Some("raft_log"))?;
        let meta = env.create_database(&mut txn, Some("raft_meta"))?;
        txn.commit()?;
        Ok(Store { env, log, meta })
    }

    fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let txn = self.env.read_txn().map_err(read_err)?;
        match self.meta.get(&txn, key).map_err(read_err)? {
            Some(bytes) => serde_json::from_slice(bytes).map(Some).map_err(read_err),
            None => Ok(None),
        }
    }

    fn put<T: Serialize>(&self, key: &str, value: &T) -> Result<()> {
        let bytes = serde_json::to_vec(value).map_err(write_err)?;
        let mut txn = self.env.write_txn().map_err(write_err)?;
        self.meta.put(&mut txn, key, &bytes).map_err(write_err)?;
        txn.commit().map_err(write_err)
    }

    /// The state machine as last applied (empty for a new store).
    pub fn applied(&self) -> Result<Applied> {
        Ok(self.get(APPLIED)?.unwrap_or_default())
    }
}

/// The Raft log half of the store.
#[derive(Clone)]
pub struct LogStore(pub Store);

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>> {
        let s = &self.0;
        let txn = s.env.read_txn().map_err(read_err)?;
        let bounds: (Bound<u64>, Bound<u64>) =
            (range.start_bound().cloned(), range.end_bound().cloned());
        let mut entries = Vec::new();
        for item in s.log.range(&txn, &bounds).map_err(read_err)? {
            let (_, bytes) = item.map_err(read_err)?;
            entries.push(serde_json::from_slice(bytes).map_err(read_err)?);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>> {
        let s = &self.0;
        let purged: Option<LogId<NodeId>> = s.get(PURGED)?;
        let last = {
            let txn = s.env.read_txn().map_err(read_err)?;
            match s.log.last(&txn).map_err(read_err)? {
                Some((_, bytes)) => {
                    let e: Entry<TypeConfig> = serde_json::from_slice(bytes).map_err(read_err)?;
                    Some(e.log_id)
                }
                None => None,
            }
        };
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last.or(purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<()> {
        self.0.put(VOTE, vote)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>> {
        self.0.get(VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<()> {
        self.0.put(COMMITTED, &committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>> {
        Ok(self.0.get(COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let s = &self.0;
        let mut txn = s.env.write_txn().map_err(write_err)?;
        for e in entries {
            let bytes = serde_json::to_vec(&e).map_err(write_err)?;
            s.log
                .put(&mut txn, &e.log_id.index, &bytes)
                .map_err(write_err)?;
        }
        let done = txn.commit().map_err(std::io::Error::other);
        let failed = done.as_ref().err().map(|e| e.to_string());
        callback.log_io_completed(done);
        match failed {
            Some(reason) => Err(StorageIOError::write_logs(AnyError::error(reason)).into()),
            None => Ok(()),
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<()> {
        let s = &self.0;
        let mut txn = s.env.write_txn().map_err(write_err)?;
        s.log
            .delete_range(&mut txn, &(log_id.index..))
            .map_err(write_err)?;
        txn.commit().map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<()> {
        let s = &self.0;
        let bytes = serde_json::to_vec(&Some(log_id)).map_err(write_err)?;
        let mut txn = s.env.write_txn().map_err(write_err)?;
        s.meta.put(&mut txn, PURGED, &bytes).map_err(write_err)?;
        s.log
            .delete_range(&mut txn, &(..=log_id.index))
            .map_err(write_err)?;
        txn.commit().map_err(write_err)
    }
}

/// Where the state machine publishes every change: the controller's listener answers
/// heartbeats from it.
pub type Published = tokio::sync::watch::Sender<Arc<Applied>>;

/// The state machine half of the store.
pub struct StateMachine {
    store: Store,
    applied: Applied,
    published: Arc<Published>,
}

impl StateMachine {
    /// The state machine as last persisted in `store`, publishing to `published`.
    pub fn open(store: Store, published: Arc<Published>) -> Result<StateMachine> {
        let applied = store.applied()?;
        published.send_replace(Arc::new(applied.clone()));
        Ok(StateMachine {
            store,
            applied,
            published,
        })
    }

    fn persist_and_publish(&mut self) -> Result<()> {
        self.store.put(APPLIED, &self.applied)?;
        self.published.send_replace(Arc::new(self.applied.clone()));
        Ok(())
    }
}

/// Builds snapshots from a copy of the state taken when asked.
pub struct SnapshotBuilder {
    store: Store,
    applied: Applied,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>> {
        let data = serde_json::to_vec(&self.applied).map_err(write_err)?;
        let meta = SnapshotMeta {
            last_log_id: self.applied.last_log_id,
            last_membership: self.applied.membership.clone(),
            snapshot_id: format!("{}", self.applied.version()),
        };
        self.store.put(
            SNAPSHOT,
            &StoredSnapshot {
                meta: meta.clone(),
                data: data.clone(),
            },
        )?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>)> {
        Ok((self.applied.last_log_id, self.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<std::result::Result<(), MetadataError>>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut results = Vec::new();
        for e in entries {
            self.applied.last_log_id = Some(e.log_id);
            results.push(match e.payload {
                EntryPayload::Blank => Ok(()),
                EntryPayload::Normal(cmd) => self.applied.state.apply(cmd),
                EntryPayload::Membership(m) => {
                    self.applied.membership = StoredMembership::new(Some(e.log_id), m);
                    Ok(())
                }
            });
        }
        self.persist_and_publish()?;
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            store: self.store.clone(),
            applied: self.applied.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<()> {
        let data = snapshot.into_inner();
        let applied: Applied = serde_json::from_slice(&data).map_err(read_err)?;
        self.store.put(
            SNAPSHOT,
            &StoredSnapshot {
                meta: meta.clone(),
                data,
            },
        )?;
        self.applied = Applied {
            last_log_id: meta.last_log_id,
            membership: meta.last_membership.clone(),
            state: applied.state,
        };
        self.persist_and_publish()
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>> {
        let stored: Option<StoredSnapshot> = self.store.get(SNAPSHOT)?;
        Ok(stored.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::cluster_state::Command;
    use openraft::{CommittedLeaderId, Membership};

    fn entry(index: u64, cmd: Command) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(cmd),
        }
    }

    #[test]
    fn the_log_and_the_applied_state_survive_a_reopen() {
        let dir = crate::storage::test_support::test_dir();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let store = Store::open(dir.path()).expect("open");
            let mut log = LogStore(store.clone());
            let mut txn = store.env.write_txn().expect("txn");
            for i in 1..=5 {
                let e = entry(i, Command::SetClusterId(format!("c{i}")));
                let bytes = serde_json::to_vec(&e).expect("json");
                store.log.put(&mut txn, &i, &bytes).expect("put");
            }
            txn.commit().expect("commit");
            assert_eq!(log.try_get_log_entries(2..4).await.expect("read").len(), 2);
            log.truncate(LogId::new(CommittedLeaderId::new(1, 1), 4))
                .await
                .expect("truncate");
            log.purge(LogId::new(CommittedLeaderId::new(1, 1), 1))
                .await
                .expect("purge");
            let state = log.get_log_state().await.expect("state");
            assert_eq!(state.last_log_id.map(|l| l.index), Some(3));
            assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(1));
            log.save_vote(&Vote::new(3, 2)).await.expect("vote");

            let (tx, _rx) = tokio::sync::watch::channel(Arc::new(Applied::default()));
            let mut sm = StateMachine::open(store.clone(), Arc::new(tx)).expect("sm");
            let results = sm
                .apply([
                    entry(2, Command::SetClusterId("first".into())),
                    entry(3, Command::DeleteTopic("missing".into())),
                ])
                .await
                .expect("apply");
            assert!(results[0].is_ok() && results[1].is_err());
            let members = Membership::new(vec![[1u64].into()], None);
            sm.apply([Entry {
                log_id: LogId::new(CommittedLeaderId::new(1, 1), 4),
                payload: EntryPayload::Membership(members),
            }])
            .await
            .expect("membership");

            drop((sm, log));
            store.env.prepare_for_closing().wait();
            let reopened = Store::open(dir.path()).expect("reopen");
            let applied = reopened.applied().expect("applied");
            assert_eq!(applied.version(), 4);
            assert_eq!(applied.state.cluster_id, "first");
            assert_eq!(
                applied
                    .membership
                    .membership()
                    .voter_ids()
                    .collect::<Vec<_>>(),
                [1]
            );
            assert_eq!(
                LogStore(reopened).read_vote().await.expect("vote"),
                Some(Vote::new(3, 2))
            );
        });
    }
}
