//! A log's part in its shard's group commit: what it hands the flush round (its dirty
//! segments' writes and the files to fdatasync) and what it does with the outcome
//! (move the high watermark and wake the appends waiting on it, or fence itself).

use std::rc::Rc;

use futures_util::future::try_join_all;

use super::LogShared;
use crate::storage::{
    batch_cache::SegmentKey,
    error::FenceReason,
    flush::{FlushTarget, PendingFlush, SyncFile, SyncHandle},
    segment::{Seal, SegmentFlush},
    Offset, Result,
};

impl FlushTarget for LogShared {
    fn begin_flush(self: Rc<Self>) -> Option<PendingFlush> {
        self.queued.set(false);
        let (mut jobs, target) = {
            let mut st = self.state.borrow_mut();
            if st.closed || st.fenced.is_some() {
                return None;
            }
            let mut jobs: Vec<(Offset, SegmentFlush)> = Vec::new();
            let cache = Rc::clone(&self.env.cache);
            for segment in st.segments.iter_mut() {
                if let Some((flush, chunks)) = segment.begin_flush() {
                    cache.insert(
                        SegmentKey {
                            log_id: self.env.id,
                            base_offset: segment.base().0,
                        },
                        &chunks,
                    );
                    jobs.push((segment.base(), flush));
                }
            }
            (jobs, st.log_end)
        };
        if jobs.is_empty() {
            return None;
        }
        let metrics = &self.env.metrics;
        for (_, f) in &jobs {
            let (log, index) = f.written_bytes();
            metrics.written_log.inc_by(log);
            metrics.written_index.inc_by(index);
        }
        let outcomes: Vec<(Offset, u64, bool, bool)> = jobs
            .iter()
            .map(|(b, f)| (*b, f.size(), f.seals(), f.names()))
            .collect();
        // Sealing runs after the round: the round makes the data durable, the seal only
        // trims and syncs files that recovery would repair anyway.
        let seals: Vec<Seal> = jobs.iter_mut().filter_map(|(_, f)| f.take_seal()).collect();
        let mut sync_files: Vec<SyncFile> = jobs.iter().flat_map(|(_, f)| f.sync_files()).collect();
        // A segment created since the last round (a roll) is named durably by the round
        // that makes its first appends durable: the directory's fdatasync runs beside
        // the data's, not on the append path.
        if jobs.iter().any(|(_, f)| f.names()) {
            sync_files.push(SyncFile {
                handle: SyncHandle::Dir(Rc::clone(&self.dir_handle)),
                path: self.dir.clone(),
            });
        }
        let written_file = jobs.iter().find_map(|(_, f)| f.written_file());
        // The round's fdatasyncs, after every write of the round, make these durable.
        let write = Box::pin(async move {
            try_join_all(jobs.into_iter().map(|(_, f)| f.run(false)))
                .await
                .map(|_| ())
        });
        let finish = Box::new(move |result: Result<()>| {
            let mut st = self.state.borrow_mut();
            match result {
                // Fenced by an earlier round that failed after this one began (rounds
                // are pipelined): these appends follow ones that may be lost, so they
                // fail with the fence (their waiters were woken by it).
                Ok(_) if st.fenced.is_some() => {}
                Ok(_) => {
                    for (base, size, seals, names) in outcomes {
                        if let Some(s) = st.segments.iter_mut().find(|s| s.base() == base) {
                            s.complete_flush(size, seals, names);
                        }
                    }
                    if !seals.is_empty() {
                        glommio::spawn_local(async move {
                            for seal in seals {
                                if let Err(e) = seal.finish().await {
                                    tracing::warn!(error = %e, "sealing a segment failed; recovery trims it on the next start");
                                }
                            }
                        })
                        .detach();
                    }
                    st.durable_end = st.durable_end.max(target);
                    st.advance_high_watermark();
                    let woken = st.ready_waiters();
                    drop(st);
                    woken.into_iter().for_each(std::task::Waker::wake);
                }
                Err(e) => {
                    tracing::error!(dir = %self.dir.display(), error = %e, "flush failed; fencing the partition");
                    self.env.metrics.fenced.inc();
                    st.fenced = e.fence_reason().or(Some(FenceReason {
                        op: "flush",
                        kind: std::io::ErrorKind::Other,
                        raw_os_error: None,
                    }));
                    let woken = std::mem::take(&mut st.waiters);
                    drop(st);
                    for (_, w) in woken {
                        w.wake();
                    }
                }
            }
        });
        Some(PendingFlush {
            write,
            sync_files,
            written_file,
            finish,
        })
    }
}
