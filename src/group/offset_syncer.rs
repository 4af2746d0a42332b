//! Durability of committed offsets: LMDB writes are made without a sync, and one
//! fdatasync of the store, run on the blocking pool, covers every commit written before
//! it started.

use std::{cell::RefCell, sync::Arc};

use super::offset_store::{OffsetStore, OffsetStoreError};

/// Batches fsyncs of the offset store: a sync started after a commit's write covers it,
/// and commits that arrive while one runs share the next.
pub struct OffsetSyncer {
    store: Arc<OffsetStore>,
    state: RefCell<SyncerState>,
}

#[derive(Default)]
struct SyncerState {
    requested: u64,
    completed: u64,
    running: bool,
    waiters: Vec<std::task::Waker>,
}

impl OffsetSyncer {
    /// A syncer of `store`.
    pub fn new(store: Arc<OffsetStore>) -> OffsetSyncer {
        OffsetSyncer {
            store,
            state: RefCell::new(SyncerState::default()),
        }
    }

    /// Resolves once a sync that started after this call has completed.
    pub async fn sync(&self) -> Result<(), OffsetStoreError> {
        let ticket = {
            let mut s = self.state.borrow_mut();
            s.requested += 1;
            s.requested
        };
        loop {
            let start = {
                let mut s = self.state.borrow_mut();
                if s.completed >= ticket {
                    return Ok(());
                }
                if s.running {
                    None
                } else {
                    s.running = true;
                    Some(s.requested)
                }
            };
            match start {
                Some(target) => {
                    let store = Arc::clone(&self.store);
                    let result = glommio::executor()
                        .spawn_blocking(move || store.sync())
                        .await;
                    let waiters = {
                        let mut s = self.state.borrow_mut();
                        s.running = false;
                        if result.is_ok() {
                            s.completed = s.completed.max(target);
                        }
                        std::mem::take(&mut s.waiters)
                    };
                    for w in waiters {
                        w.wake();
                    }
                    result?;
                }
                None => {
                    std::future::poll_fn(|cx| {
                        let mut s = self.state.borrow_mut();
                        if s.running {
                            s.waiters.push(cx.waker().clone());
                            std::task::Poll::Pending
                        } else {
                            std::task::Poll::Ready(())
                        }
                    })
                    .await
                }
            }
        }
    }
}
