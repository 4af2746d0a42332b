//! The future an append hands back: it resolves once the group commit has made the
//! append durable.

use std::{
    future::Future,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll},
};

use super::LogShared;
use crate::storage::{Offset, Result, StorageError};

/// Resolves once the log's high watermark reaches the end of an append, or fails when
/// the log is fenced or closed first.
pub struct Durable {
    pub(super) log: Rc<LogShared>,
    pub(super) target: Offset,
}

impl Future for Durable {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut st = self.log.state.borrow_mut();
        if st.high_watermark >= self.target {
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
        let at = st.waiters.partition_point(|(t, _)| *t <= self.target);
        st.waiters.insert(at, (self.target, cx.waker().clone()));
        Poll::Pending
    }
}
