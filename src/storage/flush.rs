//! Per-shard group commit.
//!
//! Every partition log on a shard hands its dirty data to one [`FlushScheduler`]. Its
//! loop waits for the first dirty append, then for `interval` to pass (or for
//! `dirty_bytes_max` to accumulate, whichever comes first), and then flushes every dirty
//! log at once, in two steps: all logs' O_DIRECT writes are submitted together through
//! io_uring, and once every write is done the round is made durable with as few
//! fdatasyncs as the file system allows.
//! Appends made while a round writes wait for the next one, which begins as soon as
//! those writes are done: its writes overlap the previous round's fdatasync (rounds are
//! pipelined two deep, see [`FlushScheduler::run`]). With a zero interval a round
//! starts as soon as the reactor is free, so back-to-back rounds still batch whatever
//! arrived during the previous one.
//!
//! Not one fdatasync per partition: measured with loadgen at 200 partitions × 100
//! msgs/s on one shard, per-partition fdatasyncs (each punted by io_uring to a kernel
//! worker and serialised at the device) made a round take ~20 ms and the p50
//! acknowledgement 24 ms. Most writes are overwrites of zeros already on disk (see
//! `FileGrowth::ZeroFill`) and change no metadata, so what they need is the device's
//! volatile cache flushed after they complete — and on ext4 (and XFS) an fdatasync
//! issues that flush for the whole device even when its file has nothing of its own
//! to commit. A round therefore fdatasyncs only the files whose metadata changed (a
//! write past the zeroed space, a sealed segment's truncation), or, when there are
//! none, one file it wrote. `syncfs(2)` would cover every file too, but it commits the
//! journal every time (the writes' mtime updates): ~2 ms per round, measured.
//!
//! The loop runs as a task on the shard's executor and never blocks it: all its I/O is
//! asynchronous.

use std::{
    cell::{Cell, RefCell},
    collections::BTreeMap,
    future::Future,
    path::PathBuf,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use futures_util::future::{join_all, LocalBoxFuture};
use glommio::io::{Directory, DmaFile};

use super::{
    config::{FlushConfig, FlushMode},
    error::{Result, StorageError},
    failpoint,
    flush_control::{FlushController, RoundSample},
};
use crate::metrics::StorageMetrics;

/// A round whose writes and fdatasync take this long is logged as a warning with its
/// timings: every produce in it waited that long for its acknowledgement.
pub const SLOW_ROUND: Duration = Duration::from_millis(100);

/// A target's share of a round.
pub struct PendingFlush {
    /// Writes the sealed data with O_DIRECT. When it resolves the data is on the device
    /// but not yet durable (the device may still hold it in a volatile cache, and file
    /// sizes may not be committed).
    pub write: LocalBoxFuture<'static, Result<()>>,
    /// Files whose metadata the writes change (size, block allocation, a seal's
    /// truncation), and the directory of a segment not yet durably named: each gets
    /// its own fdatasync once the round's writes are done.
    pub sync_files: Vec<SyncFile>,
    /// A file the writes go to, fdatasynced for the round's device-cache flush when no
    /// file of the round needs its own.
    pub written_file: Option<SyncFile>,
    /// Called exactly once with the outcome for this target: `Ok` once its writes are
    /// durable (in write-only mode: written), or the error of its writes or of the
    /// round's sync.
    pub finish: Box<dyn FnOnce(Result<()>)>,
}

/// Something with data to make durable: a partition log.
pub trait FlushTarget {
    /// Seals what is dirty and returns its share of the round, or `None` when nothing is
    /// left to do. Called once per round for each target queued with
    /// [`FlushScheduler::enqueue`].
    fn begin_flush(self: Rc<Self>) -> Option<PendingFlush>;
}

/// A file a flush wrote, or a directory whose new entries it depends on, for the
/// round's fdatasync.
pub struct SyncFile {
    /// The open file or directory.
    pub handle: SyncHandle,
    /// Its path, for errors.
    pub path: PathBuf,
}

/// What a [`SyncFile`] fdatasyncs.
pub enum SyncHandle {
    /// A data or index file.
    File(Rc<DmaFile>),
    /// A partition's directory: makes the names of segments created since its last
    /// sync durable (on ext4 and XFS an fdatasync of a directory writes its entries).
    Dir(Rc<Directory>),
}

impl SyncFile {
    /// fdatasyncs it through io_uring.
    async fn fdatasync(&self) -> glommio::Result<(), ()> {
        match &self.handle {
            SyncHandle::File(f) => f.fdatasync().await,
            SyncHandle::Dir(d) => match failpoint::check("fsync dir") {
                Some(e) => Err(e.into()),
                None => d.sync().await,
            },
        }
    }
}

struct SchedulerState {
    config: FlushConfig,
    /// The adaptive controller, when `config.target_p99` is set (made when the loop
    /// starts, on the shard's executor).
    control: RefCell<Option<FlushController>>,
    queue: RefCell<Vec<Rc<dyn FlushTarget>>>,
    dirty_bytes: Cell<u64>,
    first_dirty: Cell<Option<Instant>>,
    waker: RefCell<Option<Waker>>,
    stopping: Cell<bool>,
    rounds: Cell<u64>,
    round_waiters: RefCell<BTreeMap<u64, Waker>>,
    next_waiter: Cell<u64>,
    metrics: StorageMetrics,
}

/// The future of [`FlushScheduler::round_after`].
pub struct RoundAfter<'a> {
    state: &'a SchedulerState,
    round: u64,
    key: Option<u64>,
}

impl Future for RoundAfter<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.state.rounds.get() > self.round {
            self.key = None;
            return Poll::Ready(());
        }
        let key = match self.key {
            Some(key) => key,
            None => {
                let key = self.state.next_waiter.get();
                self.state.next_waiter.set(key + 1);
                self.key = Some(key);
                key
            }
        };
        // One entry per future, replaced on every poll, so a future polled many times
        // holds one waker, not one per poll.
        self.state
            .round_waiters
            .borrow_mut()
            .insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for RoundAfter<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.state.round_waiters.borrow_mut().remove(&key);
        }
    }
}

/// The shard's group-commit scheduler. Cloning shares it.
#[derive(Clone)]
pub struct FlushScheduler {
    state: Rc<SchedulerState>,
}

impl FlushScheduler {
    /// A scheduler with `config`; nothing flushes until [`run`](Self::run) is spawned.
    pub fn new(config: FlushConfig) -> FlushScheduler {
        FlushScheduler::with_metrics(config, StorageMetrics::default())
    }

    /// [`FlushScheduler::new`], recording every round in `metrics`.
    pub fn with_metrics(config: FlushConfig, metrics: StorageMetrics) -> FlushScheduler {
        FlushScheduler {
            state: Rc::new(SchedulerState {
                control: RefCell::new(None),
                config,
                queue: RefCell::new(Vec::new()),
                dirty_bytes: Cell::new(0),
                first_dirty: Cell::new(None),
                waker: RefCell::new(None),
                stopping: Cell::new(false),
                rounds: Cell::new(0),
                round_waiters: RefCell::new(BTreeMap::new()),
                next_waiter: Cell::new(0),
                metrics,
            }),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> FlushConfig {
        self.state.config
    }

    /// Flush rounds completed so far.
    pub fn rounds(&self) -> u64 {
        self.state.rounds.get()
    }

    /// Resolves once more than `round` rounds have completed: after a round, high
    /// watermarks may have moved, so waiting readers (long-polling fetches) look again.
    /// Dropping it unregisters its waker: a long poll that times out on an idle shard
    /// leaves nothing behind.
    pub fn round_after(&self, round: u64) -> RoundAfter<'_> {
        RoundAfter {
            state: &self.state,
            round,
            key: None,
        }
    }

    /// Queues `target` for the next round. The caller queues a target at most once per
    /// round (partition logs keep a flag).
    pub fn enqueue(&self, target: Rc<dyn FlushTarget>) {
        let s = &self.state;
        s.queue.borrow_mut().push(target);
        if s.first_dirty.get().is_none() {
            s.first_dirty.set(Some(Instant::now()));
        }
        self.wake();
    }

    /// Counts `bytes` appended since the last round; past `dirty_bytes_max` the round
    /// starts without waiting for the interval.
    pub fn add_dirty_bytes(&self, bytes: u64) {
        let s = &self.state;
        let total = s.dirty_bytes.get() + bytes;
        s.dirty_bytes.set(total);
        if total >= s.config.dirty_bytes_max {
            self.wake();
        }
    }

    /// Asks the loop to finish: it flushes what is queued and returns.
    pub fn stop(&self) {
        self.state.stopping.set(true);
        self.wake();
    }

    fn wake(&self) {
        if let Some(w) = self.state.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// The flush loop. Spawn it once on the shard's executor; it returns after
    /// [`stop`](Self::stop) once the queue is empty and the last round has finished.
    ///
    /// Rounds are pipelined two deep: once a round's writes are done its fdatasyncs run
    /// in a task of their own while the loop begins the next round, so appends that
    /// arrive during a device flush are written during it instead of after it. Rounds
    /// still finish in order, one sync at a time: a round's fdatasyncs start only after
    /// the round before it finished. A target whose share of a round failed must fail
    /// its share of the next round too, which began before it learnt of the failure
    /// (a partition log is fenced by then and refuses it).
    pub async fn run(self) {
        let s = Rc::clone(&self.state);
        let sync = s.config.mode == FlushMode::Fsync;
        if let Some(target) = s.config.target_p99 {
            *s.control.borrow_mut() =
                Some(FlushController::new(target, Instant::now(), reactor_time()));
        }
        s.metrics.flush_interval.set(s.interval().as_secs_f64());
        let mut syncing: Option<glommio::Task<()>> = None;
        loop {
            WaitFor {
                state: &s,
                ready: |s: &SchedulerState| !s.queue.borrow().is_empty() || s.stopping.get(),
            }
            .await;
            if s.queue.borrow().is_empty() {
                if let Some(last) = syncing.take() {
                    last.await;
                }
                return;
            }
            let interval = s.interval();
            if !interval.is_zero() {
                let started = s.first_dirty.get().unwrap_or_else(Instant::now);
                let left = interval.saturating_sub(started.elapsed());
                let full = WaitFor {
                    state: &s,
                    ready: |s: &SchedulerState| {
                        s.dirty_bytes.get() >= s.config.dirty_bytes_max || s.stopping.get()
                    },
                };
                futures_lite::future::or(full, glommio::timer::sleep(left)).await;
            } else {
                futures_lite::future::yield_now().await;
            }
            let targets = std::mem::take(&mut *s.queue.borrow_mut());
            let bytes = s.dirty_bytes.get();
            let began = Instant::now();
            let first_dirty = s.first_dirty.get().unwrap_or(began);
            s.dirty_bytes.set(0);
            s.first_dirty.set(None);
            let mut writes = Vec::new();
            let mut finishes = Vec::new();
            let mut sync_files = Vec::new();
            let mut written_files = Vec::new();
            for pending in targets.into_iter().filter_map(|t| t.begin_flush()) {
                writes.push(pending.write);
                finishes.push(pending.finish);
                sync_files.push(pending.sync_files);
                written_files.push(pending.written_file);
            }
            let round = Round {
                began,
                first_dirty,
                bytes,
                written: join_all(writes).await,
                write_time: began.elapsed(),
                finishes,
                sync_files,
                written_files,
            };
            if let Some(previous) = syncing.take() {
                previous.await;
            }
            if sync {
                syncing = Some(glommio::spawn_local(self.clone().finish(round)));
            } else {
                self.clone().finish(round).await;
            }
        }
    }

    /// Makes `round` durable (when syncing), records it and hands each target its
    /// outcome. Called once the round before it finished.
    async fn finish(self, round: Round) {
        let s = &self.state;
        let sync = s.config.mode == FlushMode::Fsync;
        let sync_began = Instant::now();
        let synced = if sync {
            sync_round(&round.written, round.sync_files, round.written_files).await
        } else {
            Ok(())
        };
        let sync_time = sync_began.elapsed();
        let round_time = round.began.elapsed();
        let logs = round.finishes.len();
        let m = &s.metrics;
        m.rounds.inc();
        m.round_seconds.observe(round_time.as_secs_f64());
        if sync {
            m.sync_seconds.observe(sync_time.as_secs_f64());
        }
        m.round_partitions.observe(logs as f64);
        if let Some(control) = s.control.borrow_mut().as_mut() {
            control.record(RoundSample {
                commit_wait: round.began.duration_since(round.first_dirty) + round_time,
                round: round_time,
                sync: sync_time,
            });
            if let Some(decision) = control.tick(round.began + round_time, reactor_time) {
                m.flush_interval.set(decision.interval.as_secs_f64());
            }
        }
        m.round_bytes.inc_by(round.bytes);
        if round_time >= SLOW_ROUND {
            m.slow_rounds.inc();
            tracing::warn!(
                logs,
                bytes = round.bytes,
                write_ms = round.write_time.as_millis() as u64,
                sync_ms = sync_time.as_millis() as u64,
                "slow flush round: every acknowledgement in it waited"
            );
        }
        for (finish, outcome) in round.finishes.into_iter().zip(round.written) {
            finish(outcome.and_then(|()| match &synced {
                Ok(()) => Ok(()),
                Err((path, e)) => Err(StorageError::io("fdatasync", path, copy_error(e))),
            }));
        }
        self.watermarks_moved();
    }

    /// Counts a round and wakes every reader waiting for one: high watermarks may have
    /// moved. Also called when replication moved one without a flush.
    pub fn watermarks_moved(&self) {
        let s = &self.state;
        s.rounds.set(s.rounds.get() + 1);
        for w in std::mem::take(&mut *s.round_waiters.borrow_mut()).into_values() {
            w.wake();
        }
    }
}

/// A round's sync outcome: the first failed fdatasync's file and error.
type SyncOutcome = std::result::Result<(), (PathBuf, std::io::Error)>;

/// A round whose writes are done, on its way to its fdatasyncs and outcomes.
struct Round {
    began: Instant,
    first_dirty: Instant,
    bytes: u64,
    written: Vec<Result<()>>,
    write_time: Duration,
    finishes: Vec<Box<dyn FnOnce(Result<()>)>>,
    sync_files: Vec<Vec<SyncFile>>,
    written_files: Vec<Option<SyncFile>>,
}

/// The shard reactor's run time so far (tasks and I/O polling, not spinning or sleep).
fn reactor_time() -> Duration {
    glommio::executor().executor_stats().total_runtime()
}

/// Makes a round durable once all its writes are done: fdatasyncs every file whose
/// metadata changed and every directory with new segment names, all at once, plus one
/// written file for the device flush when no file is among them. Files of
/// targets whose writes failed are skipped (those targets fail anyway). Returns the
/// first failure, which fails the whole round.
async fn sync_round(
    written: &[Result<()>],
    sync_files: Vec<Vec<SyncFile>>,
    written_files: Vec<Option<SyncFile>>,
) -> SyncOutcome {
    let mut files: Vec<SyncFile> = written
        .iter()
        .zip(sync_files)
        .filter(|(w, _)| w.is_ok())
        .flat_map(|(_, f)| f)
        .collect();
    // A directory's fdatasync flushes the device cache too on ext4, but the written
    // data's flush is not left to it.
    if !files
        .iter()
        .any(|f| matches!(f.handle, SyncHandle::File(_)))
    {
        files.extend(
            written
                .iter()
                .zip(written_files)
                .filter(|(w, _)| w.is_ok())
                .find_map(|(_, f)| f),
        );
    }
    if let Some(stall) = failpoint::stall("fdatasync") {
        glommio::timer::sleep(stall).await;
    }
    if let Some(e) = failpoint::check("fdatasync") {
        let path = files.first().map_or_else(PathBuf::new, |f| f.path.clone());
        return Err((path, e));
    }
    let results = join_all(files.iter().map(SyncFile::fdatasync)).await;
    for (f, result) in files.iter().zip(results) {
        if let Err(e) = result {
            let e = std::io::Error::from(e);
            tracing::error!(path = %f.path.display(), error = %e, "fdatasync failed");
            return Err((f.path.clone(), e));
        }
    }
    Ok(())
}

/// The same error again, errno kept, for each target the round's sync failed.
fn copy_error(e: &std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(errno) => std::io::Error::from_raw_os_error(errno),
        None => std::io::Error::new(e.kind(), e.to_string()),
    }
}

impl SchedulerState {
    /// The interval in force: the adaptive controller's latest choice, or the fixed one.
    fn interval(&self) -> Duration {
        self.control
            .borrow()
            .as_ref()
            .map_or(self.config.interval, FlushController::interval)
    }
}

struct WaitFor<'a, F: Fn(&SchedulerState) -> bool> {
    state: &'a SchedulerState,
    ready: F,
}

impl<F: Fn(&SchedulerState) -> bool> Future for WaitFor<'_, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if (self.ready)(self.state) {
            return Poll::Ready(());
        }
        *self.state.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_support::run;
    use std::time::Duration;

    /// A target that records when each of its flushes began.
    struct Recorder {
        began: RefCell<Vec<Instant>>,
    }

    impl FlushTarget for Recorder {
        fn begin_flush(self: Rc<Self>) -> Option<PendingFlush> {
            self.began.borrow_mut().push(Instant::now());
            Some(PendingFlush {
                write: Box::pin(async { Ok(()) }),
                sync_files: Vec::new(),
                written_file: None,
                finish: Box::new(|outcome| outcome.expect("synced")),
            })
        }
    }

    /// A target that records when each of its flushes began and finished, and how.
    struct Outcomes {
        events: RefCell<Vec<(&'static str, Instant, bool)>>,
    }

    impl FlushTarget for Outcomes {
        fn begin_flush(self: Rc<Self>) -> Option<PendingFlush> {
            self.events
                .borrow_mut()
                .push(("begin", Instant::now(), true));
            Some(PendingFlush {
                write: Box::pin(async { Ok(()) }),
                sync_files: Vec::new(),
                written_file: None,
                finish: Box::new(move |outcome| {
                    self.events
                        .borrow_mut()
                        .push(("finish", Instant::now(), outcome.is_ok()));
                }),
            })
        }
    }

    #[test]
    fn the_next_round_writes_while_a_round_syncs_and_finishes_after_it() {
        run(async {
            let stall = Duration::from_millis(100);
            let (s, task) = scheduler(0, u64::MAX);
            let target = Rc::new(Outcomes {
                events: RefCell::new(Vec::new()),
            });
            // The first round's fdatasync stalls; the second is queued meanwhile.
            failpoint::arm_stall("fdatasync", stall);
            s.enqueue(target.clone());
            glommio::timer::sleep(Duration::from_millis(5)).await;
            s.enqueue(target.clone());
            s.round_after(1).await;
            s.stop();
            task.await;
            let events = target.events.borrow().clone();
            let kinds: Vec<_> = events.iter().map(|(k, _, ok)| (*k, *ok)).collect();
            assert_eq!(
                kinds,
                [
                    ("begin", true),
                    ("begin", true),
                    ("finish", true),
                    ("finish", true)
                ],
                "the second round began while the first synced; both finished in order"
            );
            assert!(
                events[1].1 - events[0].1 < stall / 2,
                "{:?}",
                events[1].1 - events[0].1
            );
            assert!(events[2].1 - events[0].1 >= stall);
        });
    }

    fn scheduler(interval_ms: u64, dirty_bytes_max: u64) -> (FlushScheduler, glommio::Task<()>) {
        let s = FlushScheduler::new(FlushConfig {
            interval: Duration::from_millis(interval_ms),
            dirty_bytes_max,
            mode: FlushMode::Fsync,
            target_p99: None,
        });
        let task = glommio::spawn_local(s.clone().run());
        (s, task)
    }

    #[test]
    fn a_round_waits_for_the_interval_after_the_first_dirty_append() {
        run(async {
            let (s, task) = scheduler(30, u64::MAX);
            let r = Rc::new(Recorder {
                began: RefCell::new(Vec::new()),
            });
            let queued = Instant::now();
            s.enqueue(r.clone());
            glommio::timer::sleep(Duration::from_millis(60)).await;
            let began = r.began.borrow().clone();
            assert_eq!(began.len(), 1);
            assert!(
                began[0] - queued >= Duration::from_millis(30),
                "{:?}",
                began[0] - queued
            );
            s.stop();
            task.await;
        });
    }

    #[test]
    fn dirty_bytes_past_the_limit_start_the_round_early() {
        run(async {
            let (s, task) = scheduler(10_000, 1000);
            let r = Rc::new(Recorder {
                began: RefCell::new(Vec::new()),
            });
            s.enqueue(r.clone());
            s.add_dirty_bytes(999);
            glommio::timer::sleep(Duration::from_millis(20)).await;
            assert!(r.began.borrow().is_empty(), "below the limit: waits");
            s.add_dirty_bytes(1);
            glommio::timer::sleep(Duration::from_millis(20)).await;
            assert_eq!(r.began.borrow().len(), 1, "at the limit: flushes");
            s.stop();
            task.await;
        });
    }

    #[test]
    fn a_dropped_round_waiter_leaves_nothing_behind() {
        run(async {
            let (s, task) = scheduler(0, u64::MAX);
            for _ in 0..1000 {
                let waiting = s.round_after(s.rounds());
                let timed_out = futures_lite::future::or(
                    async {
                        waiting.await;
                        false
                    },
                    async {
                        futures_lite::future::yield_now().await;
                        true
                    },
                )
                .await;
                assert!(timed_out, "no round ran");
            }
            assert_eq!(s.state.round_waiters.borrow().len(), 0);
            let r = Rc::new(Recorder {
                began: RefCell::new(Vec::new()),
            });
            let waiting = s.round_after(s.rounds());
            s.enqueue(r);
            waiting.await;
            assert_eq!(s.state.round_waiters.borrow().len(), 0);
            s.stop();
            task.await;
        });
    }

    #[test]
    fn zero_interval_flushes_at_once_and_stop_drains_the_queue() {
        run(async {
            let (s, task) = scheduler(0, u64::MAX);
            let r = Rc::new(Recorder {
                began: RefCell::new(Vec::new()),
            });
            s.enqueue(r.clone());
            glommio::timer::sleep(Duration::from_millis(5)).await;
            assert_eq!(r.began.borrow().len(), 1);
            assert_eq!(s.rounds(), 1);
            s.enqueue(r.clone());
            s.stop();
            task.await;
            assert_eq!(
                r.began.borrow().len(),
                2,
                "stopping flushes what was queued"
            );
        });
    }
}
