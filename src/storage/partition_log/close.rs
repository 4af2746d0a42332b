//! Closing a log: its last appends made durable and its active segment sealed, or its
//! directory deleted.

use std::rc::Rc;

use super::{clean_close, durable::Wait, PartitionLog};
use crate::storage::{Result, StorageError};

impl PartitionLog {
    /// Makes everything appended durable, seals the active segment (see
    /// [`crate::storage::segment::Seal`]) without cutting its file, records where its
    /// data ends for the next open (see [`clean_close`]) and closes the log. Later
    /// calls on any clone fail with `Closed`.
    /// A fenced log is closed without flushing, successfully: its failed appends were
    /// already told so.
    pub async fn close(&self) -> Result<()> {
        let shared = &self.shared;
        let _permit = self.lock_appends().await?;
        let _maintenance = self.lock_maintenance().await?;
        let flushed = {
            let st = shared.state.borrow();
            self.durable(&st, st.log_end).waiting_for(Wait::Local)
        }
        .await;
        let finish = {
            let mut st = shared.state.borrow_mut();
            if st.closed {
                return Ok(());
            }
            st.closed = true;
            match (&flushed, &st.fenced) {
                (Ok(()), None) => st.segments.back_mut().and_then(|active| {
                    let base = active.base();
                    active.start_sealing();
                    let (flush, _) = active.begin_flush()?;
                    // After the flush took the growth its chunks wait for: the rest.
                    Some((flush, base, active.settled_written_end()))
                }),
                _ => None,
            }
        };
        if let Some((mut flush, base, settled)) = finish {
            let (size, names) = (flush.size(), flush.names());
            flush.keep_log_tail();
            flush.run(true).await?;
            if names {
                self.sync_dir().await?;
            }
            if let Some(active) = shared.state.borrow_mut().segments.back_mut() {
                active.complete_flush(size, true, names);
            }
            // Without the record the next open recovers as after a crash: cutting the
            // tail costs a trim and a zero-fill, nothing else, so a close does not fail
            // for it. Any record that does reach the disk is true: the log is final.
            // The zero-fill a close found running is written and synced first, so the
            // record holds how far it got, not where it stood when the close began.
            let written_end = settled.await.unwrap_or(0);
            if let Err(e) = clean_close::record(&shared.dir, base, size, written_end).await {
                tracing::warn!(error = %e, "cannot record a clean close; the next open cuts the active segment's tail");
            }
        }
        shared.env.cache.remove_log(shared.env.id);
        shared.env.pool.forget(&shared.dir);
        self.wake_waiters();
        match flushed {
            // The appends that the fence failed were told so; closing itself succeeded.
            Err(StorageError::Fenced { .. }) => Ok(()),
            other => other,
        }
    }

    /// Closes the log and deletes its directory with every segment in it.
    pub async fn delete(&self) -> Result<()> {
        {
            let mut st = self.shared.state.borrow_mut();
            st.closed = true;
        }
        Rc::clone(&self.shared.env.cache).remove_log(self.shared.env.id);
        self.shared.env.pool.forget(&self.shared.dir);
        self.wake_waiters();
        let dir = self.shared.dir.clone();
        glommio::executor()
            .spawn_blocking(move || match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(StorageError::io("remove dir", &dir, e))
                }
                _ => Ok(()),
            })
            .await
    }
}
