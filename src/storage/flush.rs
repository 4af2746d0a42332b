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
    round_waiters: RefCell<Vec<Waker>>,
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
                round_waiters: RefCell::new(Vec::new()),
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
    pub fn round_after(&self, round: u64) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.state.rounds.get() > round {
                return Poll::Ready(());
            }
            self.state
                .round_waiters
                .borrow_mut()
                .push(cx.waker().clone());
            Poll::Pending
        })
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
            for w in std::mem::take(&mut *s.round_waiters.borrow_mut()) {
                w.wake();
            }
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
        fn begin_flush(self: Rc<Self>, _sync: bool) -> Option<LocalBoxFuture<'static, ()>> {
            self.began.borrow_mut().push(Instant::now());
            Some(Box::pin(async {}))
        }
    }

    fn scheduler(interval_ms: u64, dirty_bytes_max: u64) -> (FlushScheduler, glommio::Task<()>) {
        let s = FlushScheduler::new(FlushConfig {
            interval: Duration::from_millis(interval_ms),
            dirty_bytes_max,
            mode: FlushMode::Fsync,
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
