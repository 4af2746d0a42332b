//! Locks by key for one shard (`!Send`): requests that change what one key names (a
//! transactional id's state, a producer's offsets pending in a group) run one at a
//! time, while other keys go on. A key is held by a borrow of its handle
//! ([`KeyLock::acquire`]) or by a value that may move into another task
//! ([`KeyLock::acquire_owned`]). A key's lock exists while someone has its handle;
//! locks nobody has are dropped as others are taken.

use std::{cell::RefCell, collections::HashMap, hash::Hash, rc::Rc};

use crate::semaphore::{Permit, Semaphore, StaticPermit};

/// The locks of one kind of key.
#[derive(Debug)]
pub struct KeyedLocks<K> {
    locks: RefCell<HashMap<K, Rc<Semaphore>>>,
}

impl<K> Default for KeyedLocks<K> {
    fn default() -> Self {
        KeyedLocks {
            locks: RefCell::new(HashMap::new()),
        }
    }
}

/// The handle of one key's lock; [`acquire`](Self::acquire) it to run alone.
pub struct KeyLock {
    key: Rc<Semaphore>,
}

/// A key held by [`KeyLock::acquire_owned`]; dropping it lets the next holder in.
pub struct HeldKey {
    _permit: StaticPermit,
    // Keeps the key's lock alive while it is held.
    _lock: KeyLock,
}

impl<K: Hash + Eq + Clone> KeyedLocks<K> {
    /// The lock of `key`.
    pub fn lock(&self, key: &K) -> KeyLock {
        let mut locks = self.locks.borrow_mut();
        locks.retain(|_, s| Rc::strong_count(s) > 1);
        let key = locks
            .entry(key.clone())
            .or_insert_with(|| Rc::new(Semaphore::new(1)));
        KeyLock {
            key: Rc::clone(key),
        }
    }
}

impl KeyLock {
    /// Waits until the key's other holders are done; the key is held until the permit
    /// is dropped.
    pub async fn acquire(&self) -> Permit<'_> {
        self.key
            .acquire_permit(1)
            .await
            .expect("a key's semaphore is never closed")
    }

    /// Like [`acquire`](Self::acquire), but the key is held by a value that owns this
    /// handle, so it may move into a task that outlives the caller: the key stays
    /// held until that value is dropped.
    pub async fn acquire_owned(self) -> HeldKey {
        let permit = self
            .key
            .acquire_static_permit(1)
            .await
            .expect("a key's semaphore is never closed");
        HeldKey {
            _permit: permit,
            _lock: self,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{cell::Cell, time::Duration};

    use super::*;
    use crate::storage::test_support::run;

    #[test]
    fn one_key_runs_one_holder_at_a_time_and_other_keys_go_on() {
        run(async {
            let locks = Rc::new(KeyedLocks::<i64>::default());
            let inside = Rc::new(Cell::new(0));
            let mut tasks = Vec::new();
            for _ in 0..3 {
                let (locks, inside) = (Rc::clone(&locks), Rc::clone(&inside));
                tasks.push(glommio::spawn_local(async move {
                    let lock = locks.lock(&7);
                    let _held = lock.acquire().await;
                    inside.set(inside.get() + 1);
                    assert_eq!(inside.get(), 1, "two holders of key 7 at once");
                    glommio::timer::sleep(Duration::from_millis(5)).await;
                    inside.set(inside.get() - 1);
                }));
            }
            glommio::timer::sleep(Duration::from_millis(1)).await;
            let other = locks.lock(&8);
            let started = std::time::Instant::now();
            drop(other.acquire().await);
            assert!(started.elapsed() < Duration::from_millis(5), "key 8 waited");
            drop(other);
            for t in tasks {
                t.await;
            }
            let _ = locks.lock(&10);
            assert_eq!(locks.locks.borrow().len(), 1, "unused locks are dropped");
        });
    }

    #[test]
    fn a_key_held_by_a_task_is_held_until_the_task_drops_it() {
        run(async {
            let locks = KeyedLocks::<i64>::default();
            let held = locks.lock(&7).acquire_owned().await;
            let done = Rc::new(Cell::new(false));
            let finisher = glommio::spawn_local({
                let done = Rc::clone(&done);
                async move {
                    glommio::timer::sleep(Duration::from_millis(20)).await;
                    done.set(true);
                    drop(held);
                }
            });
            drop(locks.lock(&10).acquire().await);
            assert_eq!(locks.locks.borrow().len(), 2, "the held key's lock is kept");
            let next = locks.lock(&7);
            drop(next.acquire().await);
            assert!(done.get(), "key 7 was taken before its holder let go");
            finisher.await;
        });
    }
}
