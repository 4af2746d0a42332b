//! Per-shard group commit.
//!
//! Every partition log on a shard hands its dirty data to one [`FlushScheduler`]. Its
//! loop waits for the first dirty append, then for `interval` to pass (or for
//! `dirty_bytes_max` to accumulate, whichever comes first), and then flushes every dirty
//! log at once: each log's writes and fdatasyncs are submitted together through
//! io_uring, so one round costs about one device round trip however many partitions
//! it covers. Appends made while a round is in flight wait for the next one. With a
//! zero interval a round starts as soon as the reactor is free, so back-to-back rounds
//! still batch whatever arrived during the previous one.
//!
//! The loop runs as a task on the shard's executor and never blocks it: all its I/O is
//! asynchronous.

use std::{
    cell::{Cell, RefCell},
    future::Future,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll, Waker},
    time::Instant,
};

use futures_util::future::{join_all, LocalBoxFuture};

use super::config::{FlushConfig, FlushMode};

/// Something with data to make durable: a partition log.
pub trait FlushTarget {
    /// Seals what is dirty and returns the future that writes it (fdatasyncing when
    /// `sync`) and records the outcome, or `None` when nothing is left to do. Called
    /// once per round for each target queued with [`FlushScheduler::enqueue`].
    fn begin_flush(self: Rc<Self>, sync: bool) -> Option<LocalBoxFuture<'static, ()>>;
}

struct SchedulerState {
    config: FlushConfig,
    queue: RefCell<Vec<Rc<dyn FlushTarget>>>,
    dirty_bytes: Cell<u64>,
    first_dirty: Cell<Option<Instant>>,
    waker: RefCell<Option<Waker>>,
    stopping: Cell<bool>,
    rounds: Cell<u64>,
}

/// The shard's group-commit scheduler. Cloning shares it.
#[derive(Clone)]
pub struct FlushScheduler {
    state: Rc<SchedulerState>,
}

impl FlushScheduler {
    /// A scheduler with `config`; nothing flushes until [`run`](Self::run) is spawned.
    pub fn new(config: FlushConfig) -> FlushScheduler {
        FlushScheduler {
            state: Rc::new(SchedulerState {
                config,
                queue: RefCell::new(Vec::new()),
                dirty_bytes: Cell::new(0),
                first_dirty: Cell::new(None),
                waker: RefCell::new(None),
                stopping: Cell::new(false),
                rounds: Cell::new(0),
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
    /// [`stop`](Self::stop) once the queue is empty.
    pub async fn run(self) {
        let s = Rc::clone(&self.state);
        let sync = s.config.mode == FlushMode::Fsync;
        loop {
            WaitFor {
                state: &s,
                ready: |s: &SchedulerState| !s.queue.borrow().is_empty() || s.stopping.get(),
            }
            .await;
            if s.queue.borrow().is_empty() {
                return;
            }
            if !s.config.interval.is_zero() {
                let started = s.first_dirty.get().unwrap_or_else(Instant::now);
                let left = s.config.interval.saturating_sub(started.elapsed());
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
            s.dirty_bytes.set(0);
            s.first_dirty.set(None);
            let flushes: Vec<_> = targets
                .into_iter()
                .filter_map(|t| t.begin_flush(sync))
                .collect();
            join_all(flushes).await;
            s.rounds.set(s.rounds.get() + 1);
        }
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
