//! A socket operation bounded in time: how a connection tells an idle or stalled client
//! from a slow one.

use std::time::Duration;

/// `fut`'s output, or `None` when it has not finished within `limit`.
pub async fn within<T>(limit: Duration, fut: impl std::future::Future<Output = T>) -> Option<T> {
    futures_lite::future::or(async { Some(fut.await) }, async {
        glommio::timer::sleep(limit).await;
        None
    })
    .await
}
