//! A shard's listener: accepts connections on `port + shard` and runs each on this
//! shard, so a client connected to a shard's port is served by that shard's core.

use std::{
    rc::Rc,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use glommio::net::TcpListener;

use crate::shard::{context::ShardContext, shard_addr};

use super::connection;

/// Accepts connections until `stop` is set.
pub async fn serve(ctx: Rc<ShardContext>, stop: Arc<AtomicBool>) -> std::io::Result<()> {
    let addr = shard_addr(&ctx.config, ctx.id);
    let listener = TcpListener::bind(addr).map_err(std::io::Error::from)?;
    tracing::info!(shard = ctx.id.0, %addr, "listening");
    let stopped = async {
        while !stop.load(Ordering::Acquire) {
            glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
        }
        None
    };
    let mut stopped = Box::pin(stopped);
    loop {
        let accepted =
            futures_lite::future::or(async { Some(listener.accept().await) }, stopped.as_mut())
                .await;
        let Some(accepted) = accepted else {
            tracing::info!(shard = ctx.id.0, "stopped accepting connections");
            return Ok(());
        };
        match accepted {
            Ok(stream) => {
                let ctx = Rc::clone(&ctx);
                glommio::spawn_local(async move {
                    let peer = stream.peer_addr().ok();
                    if let Err(e) = connection::serve(ctx, stream).await {
                        tracing::debug!(?peer, error = %e, "connection closed");
                    }
                })
                .detach();
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}
