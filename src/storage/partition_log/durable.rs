//! The future an append hands back: it resolves once the append is durable here, or
//! committed (durable on every in-sync replica), as its caller asked.

use std::{
    future::Future,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll},
};

use super::LogShared;
use crate::storage::{Offset, Result, StorageError};

/// What an append waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// This replica's group commit made it durable (acks=1).
    Local,
    /// The high watermark passed it: durable on every in-sync replica (acks=all; on a
    /// partition that is not replicated, the same as `Local`).
    Committed,
}

/// Resolves once the append is durable or committed (see [`Wait`]), or fails when the
/// log is fenced or closed first, or — waiting for the commit — when this replica
/// stopped leading, since the new leader may not keep the append.
pub struct Durable {
    pub(super) log: Rc<LogShared>,
    pub(super) target: Offset,
    pub(super) wait: Wait,
    pub(super) step_downs: u64,
}

impl Durable {
    /// The same append, waited for as `wait` says.
    pub fn waiting_for(mut self, wait: Wait) -> Durable {
        self.wait = wait;
        self
    }
}

impl Future for Durable {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut st = self.log.state.borrow_mut();
        let reached = match self.wait {
            Wait::Local => st.durable_end,
            Wait::Committed => st.high_watermark,
        };
        if reached >= self.target {
            return Poll::Ready(Ok(()));
        }
        if let Some(reason) = &st.fenced {
            return Poll::Ready(Err(StorageError::Fenced {
                path: self.log.dir.clone(),
                reason: reason.clone(),
            }));
        }
        if st.closed {
            return Poll::Ready(Err(StorageError::Closed(self.log.dir.clone())));
        }
        if self.wait == Wait::Committed && st.step_downs != self.step_downs {
            return Poll::Ready(Err(StorageError::NotLeader(self.log.dir.clone())));
        }
        let at = st.waiters.partition_point(|(t, _)| *t <= self.target);
        st.waiters.insert(at, (self.target, cx.waker().clone()));
        Poll::Pending
    }
}
