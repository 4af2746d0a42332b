//! Writing one shard's transaction states to the host's LMDB in rounds, as the group
//! commit writes data: every change queued while a round runs goes into the next one,
//! which applies them in order on the blocking pool and, when any of them waits to be
//! durable, fdatasyncs the store once for all — one hand-off to the blocking pool per
//! round where each change used to take two (a write, then a sync), and one sync for
//! every transaction that changed meanwhile.
//!
//! A change may also be queued without waiting (a completed transaction: a crash may
//! lose it, see [`TxnCoordinator::persist_eventually`](super::coordinator::TxnCoordinator::persist_eventually)).
//! It starts no round of its own at once: the id's next durable change (a transaction's
//! enrolment after the completion of the one before) usually comes first and writes
//! over it in the same round, since a state is the id's whole state and a round writes
//! only the newest of an id's changes; otherwise a round starts within
//! [`QUEUED_WRITE_DELAY`]. Until its round has written it, [`StateWriter::pending`]
//! answers it, so the id's next request reads what was queued, never the state before.

use std::{
    cell::RefCell,
    collections::HashMap,
    rc::Rc,
    sync::Arc,
    task::{Poll, Waker},
};

use super::state::TxnMetadata;
use crate::group::{
    journal::{apply_to, JournalPass, JournalRecord},
    offset_store::{OffsetStore, OffsetStoreError},
};

/// How long a change waits: for its write to LMDB only, or for a sync after it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Queued: the call returns at once; the next round writes it, unsynced unless a
    /// durable change shares the round.
    Queued,
    /// The call returns once the change is written and the store synced.
    Synced,
}

/// Why a change was not made durable.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StateWriteError {
    /// LMDB refused the write.
    #[error("transaction state not written: {0}")]
    Write(String),
    /// The store's fdatasync failed.
    #[error("transaction state not synced: {0}")]
    Sync(String),
}

/// An id's queued change: its newest state (None: forgotten) — a state is the id's
/// whole state, so a change made while one for the id is queued replaces its state —
/// the journal passes held until it is in LMDB (on a cluster), and the waiters to tell.
struct Change {
    id: String,
    state: Option<TxnMetadata>,
    _passes: Vec<JournalPass>,
    waiters: Vec<Rc<Outcome>>,
}

/// What a waiting change learns from its round.
#[derive(Default)]
struct Outcome {
    result: RefCell<Option<Result<(), StateWriteError>>>,
    waker: RefCell<Option<Waker>>,
}

impl Outcome {
    fn settle(&self, result: Result<(), StateWriteError>) {
        *self.result.borrow_mut() = Some(result);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

#[derive(Default)]
struct Queue {
    /// Changes waiting for the next round, one per id.
    next: Vec<Change>,
    /// The changes the running round writes.
    writing: Vec<Change>,
    /// Whether a round is running (its task drains `next` before it ends).
    running: bool,
    /// Whether a task waits [`QUEUED_WRITE_DELAY`] to start a round for queued changes.
    delayed_start: bool,
}

/// How long a queued change may wait for a durable one to share its round: a
/// transaction's completed state usually meets the same id's next enrolment, which
/// writes over it, so the two take one hand-off to the blocking pool and one write.
const QUEUED_WRITE_DELAY: std::time::Duration = std::time::Duration::from_millis(10);

/// A shard's writer of transaction states. `!Send`; share it by `Rc`.
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

    /// Queues `state` as `id`'s (None forgets the id) and, for [`Durability::Synced`],
    /// waits for the round that writes and syncs it. `pass` is released once the
    /// state is in LMDB.
    pub async fn write(
        self: &Rc<Self>,
        id: &str,
        state: Option<TxnMetadata>,
        pass: Option<JournalPass>,
        durability: Durability,
    ) -> Result<(), StateWriteError> {
        let outcome = match durability {
            Durability::Queued => None,
            Durability::Synced => Some(Rc::new(Outcome::default())),
        };
        let start = {
            let mut q = self.queue.borrow_mut();
            match q.next.iter_mut().find(|c| c.id == id) {
                Some(queued) => {
                    queued.state = state;
                    queued._passes.extend(pass);
                    queued.waiters.extend(outcome.clone());
                }
                None => q.next.push(Change {
                    id: id.to_string(),
                    state,
                    _passes: pass.into_iter().collect(),
                    waiters: outcome.iter().cloned().collect(),
                }),
            }
            match durability {
                _ if q.running => None,
                Durability::Synced => Some(None),
                Durability::Queued if q.delayed_start => None,
                Durability::Queued => {
                    q.delayed_start = true;
                    Some(Some(QUEUED_WRITE_DELAY))
                }
            }
        };
        if let Some(delay) = start {
            let me = Rc::clone(self);
            glommio::spawn_local(async move {
                if let Some(delay) = delay {
                    glommio::timer::sleep(delay).await;
                    me.queue.borrow_mut().delayed_start = false;
                }
                me.run().await
            })
            .detach();
        }
        let Some(outcome) = outcome else {
            return Ok(());
        };
        std::future::poll_fn(|cx| match outcome.result.borrow_mut().take() {
            Some(result) => Poll::Ready(result),
            None => {
                *outcome.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    /// Runs rounds until nothing is queued, unless a round already runs.
    async fn run(&self) {
        if std::mem::replace(&mut self.queue.borrow_mut().running, true) {
            return;
        }
        loop {
            let records: Vec<JournalRecord> = {
                let mut q = self.queue.borrow_mut();
                if q.next.is_empty() {
                    q.running = false;
                    q.writing.clear();
                    return;
                }
                q.writing = std::mem::take(&mut q.next);
                q.writing
                    .iter()
                    .map(|c| record(&c.id, c.state.as_ref()))
                    .collect()
            };
            let sync = self
                .queue
                .borrow()
                .writing
                .iter()
                .any(|c| !c.waiters.is_empty());
            let store = Arc::clone(&self.store);
            let (written, synced) = glommio::executor()
                .spawn_blocking(move || round(&store, &records, sync))
                .await;
            if let Some(e) = &synced {
                tracing::error!(error = %e, "transaction states not synced");
            }
            let changes = std::mem::take(&mut self.queue.borrow_mut().writing);
            for (change, written) in changes.into_iter().zip(written) {
                let result = match (written, &synced) {
                    (Err(e), _) => Err(StateWriteError::Write(e.to_string())),
                    (Ok(()), Some(e)) => Err(StateWriteError::Sync(e.to_string())),
                    (Ok(()), None) => Ok(()),
                };
                if let Err(e) = &result {
                    tracing::error!(id = change.id, error = %e, "transaction state not made durable");
                }
                for waiter in &change.waiters {
                    waiter.settle(result.clone());
                }
                // The change's journal passes are released here, once it is in LMDB.
            }
        }
    }
}

/// One round on the blocking pool: each record written on its own (one refused write
/// fails only its change), then one sync when `sync`.
fn round(
    store: &OffsetStore,
    records: &[JournalRecord],
    sync: bool,
) -> (Vec<Result<(), OffsetStoreError>>, Option<OffsetStoreError>) {
    let written: Vec<_> = records
        .iter()
        .map(|r| apply_to(store, std::slice::from_ref(r)))
        .collect();
    let synced = if sync { store.sync().err() } else { None };
    (written, synced)
}

/// The journal record that makes `state` `id`'s (None forgets the id), as the
/// coordinator journals it and every replica applies it.
pub fn record(id: &str, state: Option<&TxnMetadata>) -> JournalRecord {
    match state {
        Some(meta) => JournalRecord::Transaction {
            id: id.to_string(),
            meta: meta.clone(),
        },
        None => JournalRecord::TransactionExpired { id: id.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_support::{run, test_dir};
    use crate::txn::state::TxnState;
    use std::collections::BTreeSet;

    fn store_in(dir: &std::path::Path) -> Arc<OffsetStore> {
        Arc::new(OffsetStore::open(dir, 1 << 20).expect("store"))
    }

    fn meta(epoch: i16, state: TxnState) -> TxnMetadata {
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
    fn a_queued_state_is_read_back_before_its_round_and_written_by_the_next_synced_one() {
        let dir = test_dir();
        let store = store_in(dir.path());
        let reopen = dir.path().to_path_buf();
        run(async move {
            let writer = StateWriter::new(Arc::clone(&store));
            let done = meta(3, TxnState::CompleteCommit);
            writer
                .write("a", Some(done.clone()), None, Durability::Queued)
                .await
                .expect("queued");
            // Queued or being written (the blocking pool may already be at it): the
            // queue answers it.
            assert_eq!(writer.pending("a"), Some(Some(done.clone())));
            assert_eq!(writer.all_pending().get("a"), Some(&Some(done.clone())));
            let open = meta(4, TxnState::Ongoing);
            writer
                .write("a", Some(open.clone()), None, Durability::Synced)
                .await
                .expect("synced");
            writer
                .write(
                    "b",
                    Some(meta(1, TxnState::Ongoing)),
                    None,
                    Durability::Synced,
                )
                .await
                .expect("synced");
            writer
                .write("b", None, None, Durability::Synced)
                .await
                .expect("forgotten");
            assert_eq!(writer.pending("a"), None, "written: nothing pending");
            assert_eq!(store.transaction("a").expect("read"), Some(open));
            assert_eq!(store.transaction("b").expect("read"), None);
            // The queued change's delayed start still holds the writer (and the store)
            // until its timer fires.
            glommio::timer::sleep(QUEUED_WRITE_DELAY * 2).await;
        });
        // What the synced rounds wrote is in the store as a new opening reads it.
        let reopened = OffsetStore::open(&reopen, 1 << 20).expect("reopen");
        assert_eq!(
            reopened.transaction("a").expect("read").map(|m| m.state),
            Some(TxnState::Ongoing)
        );
    }

    #[test]
    fn a_queued_state_alone_is_written_within_the_delay() {
        let dir = test_dir();
        let store = store_in(dir.path());
        run(async move {
            let writer = StateWriter::new(Arc::clone(&store));
            let done = meta(3, TxnState::CompleteAbort);
            writer
                .write("q", Some(done.clone()), None, Durability::Queued)
                .await
                .expect("queued");
            glommio::timer::sleep(QUEUED_WRITE_DELAY * 5).await;
            assert_eq!(writer.pending("q"), None);
            assert_eq!(store.transaction("q").expect("read"), Some(done));
        });
    }

    #[test]
    fn changes_made_while_a_round_runs_share_the_next_round_and_the_newest_wins() {
        let dir = test_dir();
        let store = store_in(dir.path());
        run(async move {
            let writer = StateWriter::new(Arc::clone(&store));
            let waits = (0..20i16).map(|epoch| {
                let writer = Rc::clone(&writer);
                async move {
                    writer
                        .write(
                            "x",
                            Some(meta(epoch, TxnState::Ongoing)),
                            None,
                            Durability::Synced,
                        )
                        .await
                }
            });
            for result in futures_util::future::join_all(waits).await {
                result.expect("synced");
            }
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
