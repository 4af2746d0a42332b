//! A shard's listener: accepts connections on `port + shard` and runs each on this
//! shard, so a client connected to a shard's port is served by that shard's core.

use std::{
    cell::Cell,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    rc::Rc,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use glommio::net::TcpListener;

use crate::{metadata::placement::shard_addr, shard::context::ShardContext};

use super::connection;

/// How often the stop watcher looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);

/// Accepts connections until `stop` is set.
///
/// The accept loop is woken only by connections: a separate task watches `stop` and,
/// once it is set, connects to this listener to wake the pending accept. Racing the
/// accept against a periodic timer instead re-polled the same accept every 20 ms, and
/// glommio keeps one clone of the task's waker per poll until a connection arrives:
/// after ~32,000 polls — 11 minutes without a new connection — the task's reference
/// count overflowed and the shard panicked.
pub async fn serve(ctx: Rc<ShardContext>, stop: Arc<AtomicBool>) -> std::io::Result<()> {
    let addr = shard_addr(ctx.config.listen, ctx.id);
    let listener = TcpListener::bind(addr).map_err(std::io::Error::from)?;
    tracing::info!(shard = ctx.id.0, %addr, "listening");
    ctx.metrics.broker().shard_serving();
    let exited = Rc::new(Cell::new(false));
    let watcher = glommio::spawn_local(wake_on_stop(
        Arc::clone(&stop),
        wake_address(addr),
        Rc::clone(&exited),
    ));
    loop {
        let accepted = listener.accept().await;
        if stop.load(Ordering::Acquire) {
            tracing::info!(shard = ctx.id.0, "stopped accepting connections");
            break;
        }
        match accepted {
            Ok(stream) => {
                let ctx = Rc::clone(&ctx);
                ctx.metrics.connections_accepted.inc();
                ctx.metrics.connections_open.inc();
                glommio::spawn_local(async move {
                    let peer = stream.peer_addr().ok();
                    let client = connection::Client::default();
                    let outcome = connection::serve(Rc::clone(&ctx), stream, &client).await;
                    ctx.metrics.connections_open.dec();
                    ctx.metrics.connection_closed(match &outcome {
                        Ok(()) => "client",
                        Err(e) => e.reason(),
                    });
                    if let Err(e) = outcome {
                        let loud = e.is_protocol() && ctx.metrics.protocol_log_due();
                        e.log(ctx.id.0, peer, &client, loud);
                    }
                })
                .detach();
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    exited.set(true);
    watcher.await;
    Ok(())
}

/// Where to connect to reach a listener bound to `addr` (loopback for a wildcard).
fn wake_address(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv4Addr::LOCALHOST, addr.port()))
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv6Addr::LOCALHOST, addr.port()))
        }
        _ => addr,
    }
}

/// Waits for `stop`, then connects to the listener at `addr` until its accept loop has
/// `exited` (with SO_REUSEPORT a connection may land on another socket bound to the
/// port, such as a killed broker's that has not been released yet, so it retries).
async fn wake_on_stop(stop: Arc<AtomicBool>, addr: SocketAddr, exited: Rc<Cell<bool>>) {
    while !stop.load(Ordering::Acquire) {
        glommio::timer::sleep(STOP_POLL).await;
    }
    while !exited.get() {
        if let Err(e) = glommio::net::TcpStream::connect(addr).await {
            tracing::debug!(%addr, error = %e, "waking the listener failed; retrying");
        }
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
}
