//! A shard's listeners: accept connections on `port + shard` (and, with TLS, on
//! `tls port + shard`) and run each on this shard, so a client connected to a shard's
//! port is served by that shard's core.

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

use futures_rustls::TlsAcceptor;
use glommio::net::{TcpListener, TcpStream};

use crate::{
    api::{
        session::{Session, LOGIN_STEP_TIME_MAX},
        SecurityProtocol,
    },
    metadata::placement::shard_addr,
    security::principal,
    shard::context::ShardContext,
};

use super::{
    connection::{self, ConnectionError},
    deadline,
};

/// How often the stop watcher looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);

/// How long a start waits for its port while the address is in use: a broker killed a
/// moment ago releases its io_uring-held listening socket asynchronously.
const BIND_WAIT_MAX: Duration = Duration::from_secs(5);

/// Connections a listener queues before they are accepted.
const LISTEN_BACKLOG: i32 = 1024;

/// Binds a listening socket as servers on Linux do: with SO_REUSEADDR, so a restart (or
/// another server) may bind while the last run's connections sit in TIME_WAIT, and
/// without SO_REUSEPORT, which glommio's own bind sets and which let a second broker
/// bind the same port and take part of its connections. An address in use is retried
/// for [`BIND_WAIT_MAX`] and then refused.
async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let deadline = std::time::Instant::now() + BIND_WAIT_MAX;
    loop {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_reuse_address(true)?;
        match socket.bind(&addr.into()) {
            Ok(()) => {
                socket.listen(LISTEN_BACKLOG)?;
                // SAFETY: the descriptor is a bound, listening TCP socket that nothing
                // else owns; the listener takes it over.
                return Ok(unsafe { TcpListener::from_raw_fd(socket.into_raw_fd()) });
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && std::time::Instant::now() < deadline =>
            {
                glommio::timer::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Accepts connections on the plaintext listener and, with `tls`, on the TLS one, until
/// `stop` is set.
///
/// Each accept loop is woken only by connections: a separate task watches `stop` and,
/// once it is set, connects to the listener to wake the pending accept. Racing the
/// accept against a periodic timer instead re-polled the same accept every 20 ms, and
/// glommio keeps one clone of the task's waker per poll until a connection arrives:
/// after ~32,000 polls — 11 minutes without a new connection — the task's reference
/// count overflowed and the shard panicked.
pub async fn serve(
    ctx: Rc<ShardContext>,
    stop: Arc<AtomicBool>,
    tls: Option<TlsAcceptor>,
) -> std::io::Result<()> {
    let plain_addr = shard_addr(ctx.config.listen, ctx.id);
    let plain = bind(plain_addr).await?;
    tracing::info!(shard = ctx.id.0, addr = %plain_addr, "listening");
    let secure = match (tls, &ctx.config.tls) {
        (Some(acceptor), Some(config)) => {
            let addr = shard_addr(config.listen, ctx.id);
            let listener = bind(addr).await?;
            tracing::info!(shard = ctx.id.0, %addr, "listening (TLS)");
            Some((listener, addr, acceptor))
        }
        _ => None,
    };
    ctx.metrics.broker().shard_serving();
    let plain_loop = accept_loop(Rc::clone(&ctx), Arc::clone(&stop), plain, plain_addr, None);
    match secure {
        None => plain_loop.await,
        Some((listener, addr, acceptor)) => {
            // Each listener's loop is its own task. Joined in one task, every plaintext
            // connection that woke the task re-polled the pending TLS accept, and
            // glommio adds a waker clone per poll of a pending accept until it
            // completes: after 32,767 plaintext connections without a TLS one the
            // task's reference count overflowed and the shard died (see `accept_loop`).
            let secure =
                glommio::spawn_local(accept_loop(ctx, stop, listener, addr, Some(acceptor)));
            plain_loop.await;
            secure.await;
        }
    }
    Ok(())
}

/// Accepts on `listener` (bound to `addr`) until `stop`, serving each connection on
/// this shard, through a TLS handshake first when `tls` is given.
async fn accept_loop(
    ctx: Rc<ShardContext>,
    stop: Arc<AtomicBool>,
    listener: TcpListener,
    addr: SocketAddr,
    tls: Option<TlsAcceptor>,
) {
    let exited = Rc::new(Cell::new(false));
    let watcher = glommio::spawn_local(wake_on_stop(
        Arc::clone(&stop),
        wake_address(addr),
        Rc::clone(&exited),
    ));
    loop {
        let accepted = listener.accept().await;
        if stop.load(Ordering::Acquire) {
            tracing::info!(shard = ctx.id.0, %addr, "stopped accepting connections");
            break;
        }
        match accepted {
            Ok(stream) => {
                let ctx = Rc::clone(&ctx);
                let tls = tls.clone();
                ctx.metrics.connections.accepted.inc();
                ctx.metrics.connections.open.inc();
                glommio::spawn_local(async move {
                    let peer = stream.peer_addr().ok();
                    let client = connection::Client::default();
                    let outcome = open(Rc::clone(&ctx), stream, peer, tls, &client).await;
                    ctx.metrics.connections.open.dec();
                    ctx.metrics.connections.closed(match &outcome {
                        Ok(()) => "client",
                        Err(e) => e.reason(),
                    });
                    if let Err(e) = outcome {
                        let loud = e.is_protocol() && ctx.metrics.connections.protocol_log_due();
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
}

/// Serves an accepted connection: as it is, or after a TLS handshake that must finish
/// within the idle timeout (a stalled handshake holds nothing longer than an idle
/// client does).
async fn open(
    ctx: Rc<ShardContext>,
    stream: TcpStream,
    peer: Option<SocketAddr>,
    tls: Option<TlsAcceptor>,
    client: &connection::Client,
) -> Result<(), ConnectionError> {
    stream.set_nodelay(true).map_err(std::io::Error::from)?;
    let sasl = ctx.config.sasl.is_some();
    let Some(acceptor) = tls else {
        let session = Session::new(SecurityProtocol::Plaintext, peer, sasl);
        return connection::serve(ctx, stream, Rc::new(session), client).await;
    };
    // A handshake gets the idle timeout, at most the time a login step may take.
    let limit = ctx.config.idle_timeout.min(LOGIN_STEP_TIME_MAX);
    let secured = deadline::within(limit, acceptor.accept(stream))
        .await
        .ok_or(ConnectionError::Idle(limit))?
        .map_err(ConnectionError::Handshake)?;
    let certificate = secured
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|leaf| principal::of_certificate(leaf.as_ref()));
    let session =
        Session::new(SecurityProtocol::Ssl, peer, sasl).with_certificate_principal(certificate);
    connection::serve(ctx, secured, Rc::new(session), client).await
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
