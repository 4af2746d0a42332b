//! A shard's running background tasks: each has a name, sleeps between its rounds in
//! a way [`Tasks::stop`] can cut short, and is stopped before the shard closes its
//! logs, so no retention pass or compaction is still touching a log being closed. Which
//! tasks a shard runs is listed in `shard::background`.

use std::{
    cell::RefCell,
    future::Future,
    rc::{Rc, Weak},
    time::Duration,
};

use glommio::task::JoinHandle;

use crate::semaphore::Semaphore;

/// How long [`Tasks::stop`] waits for a task in the middle of its work before it
/// cancels it at its next await.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// The running background tasks of one shard.
pub struct Tasks {
    /// Never given a permit: closed by `stop`, which wakes every task waiting on it.
    stopping: Rc<Semaphore>,
    running: RefCell<Vec<(&'static str, JoinHandle<()>)>>,
}

impl Default for Tasks {
    fn default() -> Tasks {
        Tasks {
            stopping: Rc::new(Semaphore::new(0)),
            running: RefCell::new(Vec::new()),
        }
    }
}

impl Tasks {
    /// Runs `tick` on `owner` at once and then every `every`, until `owner` is gone or
    /// the tasks stop. Only the sleep in between is cut short by a stop.
    pub fn periodic<S: 'static>(
        &self,
        name: &'static str,
        every: Duration,
        owner: Weak<S>,
        mut tick: impl AsyncFnMut(&Rc<S>) + 'static,
    ) {
        let stopping = Rc::clone(&self.stopping);
        self.spawn(name, async move {
            loop {
                let Some(owner) = owner.upgrade() else {
                    return;
                };
                tick(&owner).await;
                drop(owner);
                if !pause(&stopping, every).await {
                    return;
                }
            }
        });
    }

    /// Runs `once` on `owner` after `delay`, unless the tasks stop first.
    pub fn after<S: 'static>(
        &self,
        name: &'static str,
        delay: Duration,
        owner: Weak<S>,
        once: impl AsyncFnOnce(&Rc<S>) + 'static,
    ) {
        let stopping = Rc::clone(&self.stopping);
        self.spawn(name, async move {
            if pause(&stopping, delay).await {
                if let Some(owner) = owner.upgrade() {
                    once(&owner).await;
                }
            }
        });
    }

    /// Runs `task` as one of the shard's tasks: stopped (cancelled at an await when it
    /// does not end by itself within [`STOP_WAIT`]) with the others.
    pub fn spawn(&self, name: &'static str, task: impl Future<Output = ()> + 'static) {
        self.adopt(name, glommio::spawn_local(task).detach());
    }

    /// Takes a task already running as one of the shard's, stopped with the others.
    pub fn adopt(&self, name: &'static str, handle: JoinHandle<()>) {
        self.running.borrow_mut().push((name, handle));
    }

    /// Wakes every task sleeping between rounds (each then ends) and waits for those
    /// in the middle of a round, cancelling any still running after [`STOP_WAIT`].
    pub async fn stop(&self) {
        self.stopping.close();
        let running = std::mem::take(&mut *self.running.borrow_mut());
        for (name, mut handle) in running {
            let ended = async {
                (&mut handle).await;
                true
            };
            let deadline = async {
                glommio::timer::sleep(STOP_WAIT).await;
                false
            };
            if !futures_lite::future::or(ended, deadline).await {
                tracing::warn!(
                    task = name,
                    "a background task did not stop in time; cancelled"
                );
                handle.cancel();
            }
        }
    }
}

/// Sleeps `period`; false when the tasks stopped meanwhile (or had already).
async fn pause(stopping: &Semaphore, period: Duration) -> bool {
    let slept = async {
        glommio::timer::sleep(period).await;
        true
    };
    // `acquire` never succeeds: it fails when `stop` closes the semaphore.
    let stopped = async {
        let _ = stopping.acquire(1).await;
        false
    };
    futures_lite::future::or(slept, stopped).await
}

#[cfg(test)]
mod tests {
    use std::{cell::Cell, time::Instant};

    use super::*;
    use crate::storage::test_support::run;

    #[test]
    fn stop_wakes_sleeping_tasks_and_waits_for_one_in_the_middle_of_its_work() {
        run(async {
            let tasks = Tasks::default();
            let ticks = Rc::new(Cell::new(0u32));
            let hour = Duration::from_secs(3600);
            tasks.periodic("ticks", hour, Rc::downgrade(&ticks), async |n| {
                n.set(n.get() + 1)
            });
            let work = Rc::new(Cell::new("not started"));
            tasks.after("work", Duration::ZERO, Rc::downgrade(&work), async |w| {
                w.set("started");
                glommio::timer::sleep(Duration::from_millis(100)).await;
                w.set("finished");
            });
            glommio::timer::sleep(Duration::from_millis(20)).await;
            assert_eq!((ticks.get(), work.get()), (1, "started"));
            let stopping = Instant::now();
            tasks.stop().await;
            assert_eq!(work.get(), "finished", "stop waits for work under way");
            assert!(
                stopping.elapsed() < Duration::from_secs(1),
                "a task sleeping for an hour ends at once"
            );
            assert_eq!(ticks.get(), 1);
        });
    }

    #[test]
    fn a_task_ends_when_its_owner_is_gone() {
        run(async {
            let tasks = Tasks::default();
            let owner = Rc::new(Cell::new(0u32));
            let tick = Duration::from_millis(5);
            tasks.periodic("ticks", tick, Rc::downgrade(&owner), async |n| {
                n.set(n.get() + 1)
            });
            glommio::timer::sleep(Duration::from_millis(30)).await;
            assert!(owner.get() >= 2);
            drop(owner);
            glommio::timer::sleep(Duration::from_millis(30)).await;
            let (name, handle) = tasks.running.borrow_mut().pop().expect("one task");
            assert_eq!(name, "ticks");
            assert_eq!(handle.await, Some(()), "it ended by itself");
        });
    }
}
