//! glommio's semaphore, safe to cancel a wait on. glommio 0.9 wakes, on each release,
//! only the waiters the free units cover, taking them off its queue; a waiter whose future is dropped after that wake and before it ran (a
//! connection closed, a task cancelled, a timeout) takes its turn with it, and the
//! waiters behind it sleep with the units free. In weir that stopped a partition's appends
//! or a shard's zero-fills for good (a storage test hung until CI's limit). Every wait
//! here passes the turn on when it is dropped unfinished. Use this type, never glommio's
//! (tests/architecture.rs holds to it).

use std::rc::Rc;

pub use glommio::sync::{Permit, StaticPermit};

/// What a wait ends with: units, or an error once the semaphore is closed.
pub type Acquired<T> = glommio::Result<T, ()>;

/// A counting semaphore for one shard (`!Send`): a wait that is dropped never keeps
/// another from units that are free.
#[derive(Debug)]
pub struct Semaphore {
    inner: Rc<glommio::sync::Semaphore>,
}

impl Semaphore {
    /// A semaphore holding `units` units.
    pub fn new(units: u64) -> Semaphore {
        Semaphore {
            inner: Rc::new(glommio::sync::Semaphore::new(units)),
        }
    }

    /// Waits for `units` units, given back when the permit is dropped.
    pub async fn acquire_permit(&self, units: u64) -> Acquired<Permit<'_>> {
        let turn = PassTurnOnDrop(&self.inner);
        let permit = self.inner.acquire_permit(units).await;
        turn.keep();
        permit
    }

    /// Waits for `units` units, given back when the permit (which owns a handle on the
    /// semaphore, so it may outlive this borrow) is dropped.
    pub async fn acquire_static_permit(&self, units: u64) -> Acquired<StaticPermit> {
        let turn = PassTurnOnDrop(&self.inner);
        let permit = self.inner.acquire_static_permit(units).await;
        turn.keep();
        permit
    }

    /// Waits for `units` units and keeps them: the caller gives them back with
    /// [`signal`](Self::signal).
    pub async fn acquire(&self, units: u64) -> Acquired<()> {
        let turn = PassTurnOnDrop(&self.inner);
        let acquired = self.inner.acquire(units).await;
        turn.keep();
        acquired
    }

    /// Adds `units` units, waking the waiters they cover.
    pub fn signal(&self, units: u64) {
        self.inner.signal(units);
    }

    /// Fails every wait, present and future.
    pub fn close(&self) {
        self.inner.close();
    }

    /// Units free now.
    pub fn available(&self) -> u64 {
        self.inner.available()
    }
}

/// Dropped while a wait is unfinished (the wait's own future dropped first, so it is off
/// the queue): offers the free units to the waiters again, so a wake the dropped wait
/// took reaches the next one. Over-waking is harmless: a waiter the units do not cover
/// queues again.
struct PassTurnOnDrop<'a>(&'a glommio::sync::Semaphore);

impl PassTurnOnDrop<'_> {
    /// The wait finished: nothing to pass on.
    fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for PassTurnOnDrop<'_> {
    fn drop(&mut self) {
        self.0.signal(0);
    }
}

#[cfg(test)]
mod tests {
    use std::{cell::Cell, rc::Rc, time::Duration};

    use super::Semaphore;

    fn run(test: impl std::future::Future<Output = ()> + 'static) {
        glommio::LocalExecutorBuilder::default()
            .make()
            .expect("executor")
            .run(test);
    }

    /// Spawns a task that waits for `units` and then counts itself done.
    fn waiter(sem: &Rc<Semaphore>, units: u64, done: &Rc<Cell<u32>>) -> glommio::Task<()> {
        let (sem, done) = (Rc::clone(sem), Rc::clone(done));
        glommio::spawn_local(async move {
            let _permit = sem.acquire_permit(units).await.expect("open");
            done.set(done.get() + 1);
        })
    }

    async fn settle() {
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }

    #[test]
    fn a_waiter_dropped_after_its_wake_passes_the_units_on() {
        run(async {
            let sem = Rc::new(Semaphore::new(1));
            let done = Rc::new(Cell::new(0));
            let held = sem.acquire_static_permit(1).await.expect("open");
            let first = waiter(&sem, 1, &done);
            let second = waiter(&sem, 1, &done);
            settle().await;
            // The release wakes `first` alone; it is cancelled before it runs.
            drop(held);
            drop(first);
            settle().await;
            assert_eq!(done.get(), 1, "the second waiter got the free unit");
            second.await;
            assert_eq!(sem.available(), 1);
        });
    }

    #[test]
    fn closing_fails_every_wait() {
        run(async {
            let sem = Rc::new(Semaphore::new(0));
            let waiting = {
                let sem = Rc::clone(&sem);
                glommio::spawn_local(async move { sem.acquire(1).await.is_err() })
            };
            settle().await;
            sem.close();
            assert!(waiting.await, "a closed semaphore fails the wait");
            assert!(sem.acquire_permit(1).await.is_err());
        });
    }
}
