//! Writing one shard's transaction states into the host's LMDB, the queryable view of
//! the logs that make them durable (a cluster's journal partitions, a single host's
//! state log, `state_log`): changes are written in rounds, on the blocking pool and
//! unsynced — a crash loses nothing a replay of the log does not restore. A change
//! starts no round at once: it waits up to [`WRITE_DELAY`] for others to share it, and
//! a round writes only the newest of an id's changes, so a transaction's three changes
//! (open, prepare, complete) usually take one write. Until its round has written it,
//! [`StateWriter::pending`] answers it, so every read sees the newest state.

use std::{cell::RefCell, collections::HashMap, rc::Rc, sync::Arc, time::Duration};

use super::{state::TxnMetadata, stored::record};
use crate::group::{
    journal::{apply_to, JournalPass, JournalRecord},
    offset_store::OffsetStore,
};

/// An id's queued change: its newest state (None: forgotten) — a state is the id's
/// whole state, so a change made while one for the id is queued replaces its state —
/// and the journal passes held until it is in LMDB (a checkpoint or a journal snapshot
/// reads LMDB as holding every change appended before it).
struct Change {
    id: String,
    state: Option<TxnMetadata>,
    _passes: Vec<JournalPass>,
}

#[derive(Default)]
struct Queue {
    /// Changes waiting for the next round, one per id.
    next: Vec<Change>,
    /// The changes the running round writes.
    writing: Vec<Change>,
    /// Whether a round is running or about to (its task drains `next` before it ends).
    running: bool,
}

/// How long a change may wait for others to share its round: a transaction's
/// changes come about a millisecond apart, so one round usually writes all three.
pub const WRITE_DELAY: Duration = Duration::from_millis(10);

/// A shard's writer of transaction states into LMDB. `!Send`; share it by `Rc`.
pub struct StateWriter {
    store: Arc<OffsetStore>,
    queue: RefCell<Queue>,
}

impl StateWriter {
    /// A writer into `store`.
    pub fn new(store: Arc<OffsetStore>) -> Rc<StateWriter> {
        Rc::new(StateWriter {
            store,
            queue: RefCell::new(Queue::default()),
        })
    }

    /// `id`'s newest state among the changes queued or being written, if any change to
    /// it is: `Some(None)` when the newest forgets it.
    pub fn pending(&self, id: &str) -> Option<Option<TxnMetadata>> {
        let q = self.queue.borrow();
        // A queued change is newer than the running round's.
        q.next
            .iter()
            .chain(&q.writing)
            .find(|c| c.id == id)
            .map(|c| c.state.clone())
    }

    /// Every id with a change queued or being written, each with its newest state.
    pub fn all_pending(&self) -> HashMap<String, Option<TxnMetadata>> {
        let q = self.queue.borrow();
        // The running round's changes are older than the queued ones: later wins.
        q.writing
            .iter()
            .chain(&q.next)
            .map(|c| (c.id.clone(), c.state.clone()))
            .collect()
    }

    /// Queues `state` as `id`'s (None forgets the id) for a round within
    /// [`WRITE_DELAY`]; `pass` is released once the state is in LMDB.
    pub fn write(self: &Rc<Self>, id: &str, state: Option<TxnMetadata>, pass: Option<JournalPass>) {
        let start = {
            let mut q = self.queue.borrow_mut();
            match q.next.iter_mut().find(|c| c.id == id) {
                Some(queued) => {
                    queued.state = state;
                    queued._passes.extend(pass);
                }
                None => q.next.push(Change {
                    id: id.to_string(),
                    state,
                    _passes: pass.into_iter().collect(),
                }),
            }
            !std::mem::replace(&mut q.running, true)
        };
        if start {
            let me = Rc::clone(self);
            glommio::spawn_local(async move { me.run().await }).detach();
        }
    }

    /// Runs rounds, each after [`WRITE_DELAY`], until nothing is queued.
    async fn run(&self) {
        loop {
            glommio::timer::sleep(WRITE_DELAY).await;
            let records: Vec<JournalRecord> = {
                let mut q = self.queue.borrow_mut();
                if q.next.is_empty() {
                    q.running = false;
                    return;
                }
                q.writing = std::mem::take(&mut q.next);
                q.writing
                    .iter()
                    .map(|c| record(&c.id, c.state.as_ref()))
                    .collect()
            };
            let store = Arc::clone(&self.store);
            let written = glommio::executor()
                .spawn_blocking(move || round(&store, &records))
                .await;
            let mut q = self.queue.borrow_mut();
            let changes = std::mem::take(&mut q.writing);
            for (change, written) in changes.into_iter().zip(written) {
                let Err(e) = written else {
                    // Its journal passes are released here, once it is in LMDB.
                    continue;
                };
                // LMDB lacks it: it stays pending (answering reads, holding its
                // passes) for the next round, unless a newer change replaced it.
                tracing::error!(id = change.id, error = %e, "transaction state not written to LMDB; retrying");
                if !q.next.iter().any(|c| c.id == change.id) {
                    q.next.push(change);
                }
            }
        }
    }
}

/// One round on the blocking pool: each record written on its own, so one refused
/// write fails only its change.
fn round(store: &OffsetStore, records: &[JournalRecord]) -> Vec<Result<(), String>> {
    records
        .iter()
        .map(|r| apply_to(store, std::slice::from_ref(r)).map_err(|e| e.to_string()))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::storage::test_support::{run, test_dir};
    use crate::txn::{state::TxnState, stored::TxnStates};
    use std::collections::BTreeSet;

    /// An LMDB store in `dir`.
    pub(crate) fn store_in(dir: &std::path::Path) -> Arc<OffsetStore> {
        Arc::new(OffsetStore::open(dir, 1 << 20).expect("store"))
    }

    /// A state of producer 7 at `epoch`.
    pub(crate) fn meta(epoch: i16, state: TxnState) -> TxnMetadata {
        TxnMetadata {
            producer_id: 7,
            producer_epoch: epoch,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            started_ms: -1,
            updated_ms: 0,
            next_producer_id: None,
            previous_producer: None,
            markers_bump_epoch: false,
        }
    }

    #[test]
    fn a_queued_state_is_read_back_before_its_round_and_from_lmdb_after_it() {
        let dir = test_dir();
        let store = store_in(dir.path());
        let reopen = dir.path().to_path_buf();
        run(async move {
            let writer = StateWriter::new(Arc::clone(&store));
            let done = meta(3, TxnState::CompleteCommit);
            writer.write("a", Some(done.clone()), None);
            writer.write("b", Some(meta(1, TxnState::Ongoing)), None);
            assert_eq!(writer.pending("a"), Some(Some(done.clone())));
            assert_eq!(writer.all_pending().get("a"), Some(&Some(done.clone())));
            assert_eq!(
                store.transaction("a").expect("read"),
                None,
                "not before its round"
            );
            let open = meta(4, TxnState::Ongoing);
            writer.write("a", Some(open.clone()), None);
            writer.write("b", None, None);
            assert_eq!(writer.pending("a"), Some(Some(open.clone())), "the newest");
            assert_eq!(writer.pending("b"), Some(None), "forgotten");
            glommio::timer::sleep(WRITE_DELAY * 5).await;
            assert_eq!(writer.pending("a"), None, "written: nothing pending");
            assert!(writer.all_pending().is_empty());
            assert_eq!(store.transaction("a").expect("read"), Some(open));
            assert_eq!(store.transaction("b").expect("read"), None);
            store.sync().expect("sync");
        });
        let reopened = OffsetStore::open(&reopen, 1 << 20).expect("reopen");
        assert_eq!(
            reopened.transaction("a").expect("read").map(|m| m.state),
            Some(TxnState::Ongoing)
        );
    }

    #[test]
    fn changes_made_while_a_round_runs_go_to_the_next_and_the_newest_wins() {
        let dir = test_dir();
        let store = store_in(dir.path());
        run(async move {
            let writer = StateWriter::new(Arc::clone(&store));
            for epoch in 0..20i16 {
                writer.write("x", Some(meta(epoch, TxnState::Ongoing)), None);
                // Some land while a round writes, some in the queue behind it.
                glommio::timer::sleep(WRITE_DELAY / 4).await;
                // As the coordinator reads: the queue, else LMDB.
                let read = writer
                    .pending("x")
                    .unwrap_or_else(|| store.transaction("x").expect("read"));
                assert_eq!(
                    read.map(|m| m.producer_epoch),
                    Some(epoch),
                    "a read sees the newest change"
                );
            }
            glommio::timer::sleep(WRITE_DELAY * 5).await;
            assert_eq!(
                store
                    .transaction("x")
                    .expect("read")
                    .map(|m| m.producer_epoch),
                Some(19),
                "applied in the order made"
            );
            assert!(writer.all_pending().is_empty());
        });
    }
}
