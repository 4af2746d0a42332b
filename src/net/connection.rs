//! One client connection: a reader that decodes requests and starts each one's handler
//! at once, and a writer that sends the responses strictly in request order. Requests
//! therefore overlap (a produce waiting for its group commit does not hold up the next
//! request), yet the client sees responses in the order it asked.
//!
//! What a connection may hold is bounded, so a client that stops reading stalls only
//! itself: its unanswered requests may claim at most a share of the shard's budget
//! (request bytes, plus what the handler says its answer may carry: for a fetch, its
//! record bytes) before the reader
//! waits, and a response the client accepts no byte of for the idle timeout ends the
//! connection.

use std::{cell::Cell, rc::Rc, time::Duration};

use bytes::Bytes;
use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};
use glommio::{channels::local_channel, Task};

use crate::{
    api::{self, session::Session, RequestError},
    semaphore::{Semaphore, StaticPermit},
    shard::context::ShardContext,
};

use super::{
    deadline::within,
    frame::{FrameError, FrameReader, ReadError},
};

/// Requests of one connection being handled at once; past this the reader waits.
const IN_FLIGHT_REQUESTS_MAX: usize = 64;

/// One connection's unanswered requests may claim this fraction of the shard's
/// `inflight_bytes_max` before its reader waits for answers to be sent.
const CONNECTION_SHARE_DIVISOR: usize = 16;

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// Reading or writing the socket failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// The client sent a frame the broker refuses.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The client sent nothing for the idle timeout.
    #[error("idle for {0:?}")]
    Idle(Duration),
    /// A response had not all gone out after the idle timeout: the client is not reading.
    #[error("client did not read a response within {0:?}")]
    Stalled(Duration),
    /// The client sent a request the broker refuses.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The client's SASL login failed (its refusal was sent first).
    #[error("SASL login failed")]
    LoginFailed,
    /// The TLS handshake failed: not TLS, an old protocol version, an untrusted client
    /// certificate.
    #[error("TLS handshake: {0}")]
    Handshake(std::io::Error),
}

impl From<ReadError> for ConnectionError {
    fn from(e: ReadError) -> ConnectionError {
        match e {
            ReadError::Io(e) => ConnectionError::Io(e),
            ReadError::Frame(e) => ConnectionError::Frame(e),
            ReadError::Idle(limit) => ConnectionError::Idle(limit),
        }
    }
}

impl ConnectionError {
    /// A short name for why the connection ended, for the metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            ConnectionError::Io(_) => "socket",
            ConnectionError::Frame(_) => "frame",
            ConnectionError::Idle(_) => "idle",
            ConnectionError::Stalled(_) => "stalled",
            ConnectionError::Request(_) => "request",
            ConnectionError::Handshake(_) => "tls",
            ConnectionError::LoginFailed => "login",
        }
    }

    /// True for a protocol refusal: a frame or request the broker does not serve, which
    /// a client's settings may cause and an operator should see.
    pub fn is_protocol(&self) -> bool {
        matches!(
            self,
            ConnectionError::Frame(_) | ConnectionError::Request(_) | ConnectionError::Handshake(_)
        )
    }

    /// Logs why the connection ended, with who the client said it was: a protocol
    /// refusal at info when `loud` (the caller rate-limits), anything else at debug.
    pub fn log(
        &self,
        shard: usize,
        peer: Option<std::net::SocketAddr>,
        client: &Client,
        loud: bool,
    ) {
        let id = client.id.borrow();
        let software = client.software.borrow();
        let (id, software) = (
            id.as_deref().unwrap_or("-"),
            software.as_deref().unwrap_or("-"),
        );
        match self {
            ConnectionError::Frame(_) | ConnectionError::Request(_) => {
                if loud {
                    tracing::info!(shard, ?peer, client_id = id, client_software = software, error = %self, "closed a connection: the client sent what the broker does not serve");
                }
            }
            _ => {
                tracing::debug!(shard, ?peer, client_id = id, client_software = software, error = %self, "connection closed")
            }
        }
    }
}

/// Who a connection's client said it is: the client id of its first request, and the
/// software name and version of its ApiVersions (v3+). For logs.
#[derive(Debug, Default)]
pub struct Client {
    id: std::cell::RefCell<Option<String>>,
    software: std::cell::RefCell<Option<String>>,
}

impl Client {
    fn learn(&self, request: &api::Decoded) {
        if self.id.borrow().is_none() {
            if let Some(id) = request.client_id() {
                *self.id.borrow_mut() = Some(id.to_string());
            }
        }
        if let Some(software) = request.client_software() {
            *self.software.borrow_mut() = Some(software.to_string());
        }
    }

    fn learn_from_error(&self, error: &RequestError) {
        if let RequestError::Version {
            client_id: Some(id),
            ..
        } = error
        {
            if self.id.borrow().is_none() {
                *self.id.borrow_mut() = Some(id.clone());
            }
        }
    }
}

/// The bytes one connection's unanswered requests claim, and a wake-up for its reader
/// whenever answers are sent.
struct Claims {
    bytes: Cell<usize>,
    limit: usize,
    sent: Semaphore,
    writer_ended: Cell<bool>,
}

impl Claims {
    fn new(limit: usize) -> Claims {
        Claims {
            bytes: Cell::new(0),
            limit,
            sent: Semaphore::new(0),
            writer_ended: Cell::new(false),
        }
    }

    /// Waits until `claim` more bytes fit under the limit (always at once when nothing
    /// is claimed, so any single request proceeds), then claims them. `false` when the
    /// writer has ended and nothing will be sent any more.
    async fn admit(&self, claim: usize) -> bool {
        while self.bytes.get() > 0 && self.bytes.get().saturating_add(claim) > self.limit {
            if self.writer_ended.get() || self.sent.acquire(1).await.is_err() {
                return false;
            }
        }
        self.bytes.set(self.bytes.get().saturating_add(claim));
        true
    }

    /// An answer was sent (or dropped): its claim is free again.
    fn release(&self, claim: usize) {
        self.bytes.set(self.bytes.get().saturating_sub(claim));
        self.sent.signal(1);
    }

    fn end_writer(&self) {
        self.writer_ended.set(true);
        self.sent.signal(1);
    }
}

/// Serves one connection — a TCP stream, or a TLS stream over one — of `session`,
/// until the client closes it or misbehaves, or its login fails.
pub async fn serve<S>(
    ctx: Rc<ShardContext>,
    stream: S,
    session: Rc<Session>,
    client: &Client,
) -> Result<(), ConnectionError>
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let idle = ctx.config.idle_timeout;
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let (tx, rx) = local_channel::new_bounded::<(Task<Option<Bytes>>, StaticPermit, usize)>(
        IN_FLIGHT_REQUESTS_MAX,
    );
    let claims = Rc::new(Claims::new(
        ctx.config.inflight_bytes_max / CONNECTION_SHARE_DIVISOR,
    ));
    let writer_claims = Rc::clone(&claims);
    let write_loop = glommio::spawn_local(async move {
        let written = async {
            while let Some((task, permit, claim)) = rx.recv().await {
                match task.await {
                    // A response not all gone out within the idle timeout: the client
                    // is not reading.
                    Some(response) if !response.is_empty() => {
                        within(idle, writer.write_all(&response))
                            .await
                            .ok_or(ConnectionError::Stalled(idle))??
                    }
                    Some(_) => {}
                    // An answer that could not be encoded (the stream cannot be
                    // trusted past it), or a failed acks=0 produce: close.
                    None => return Ok(()),
                }
                // The request's bytes count against the shard until its answer is sent.
                drop(permit);
                writer_claims.release(claim);
            }
            Ok::<(), ConnectionError>(())
        }
        .await;
        writer_claims.end_writer();
        // Shut the sending side now (a non-blocking shutdown(2)), so the client sees the
        // end of the stream even while the broker has nothing else to do.
        let closed = writer.close().await;
        // Requests read before the answers stopped still run to their end, answered to
        // no one, as Kafka's handlers finish what they took: dropping their tasks would
        // cancel them, and an acks=0 producer that wrote its last batches and closed
        // (its Metadata answer then failing to go out) lost batches the broker had read.
        while let Some((task, permit, claim)) = rx.recv().await {
            let claims = Rc::clone(&writer_claims);
            glommio::spawn_local(async move {
                let _ = task.await;
                drop(permit);
                claims.release(claim);
            })
            .detach();
        }
        written.and(closed.map_err(ConnectionError::Io))
    });
    let mut frames = FrameReader::new(ctx.config.max_request_bytes);
    let budget_kib = ctx.config.inflight_bytes_max.div_ceil(1024) as u64;
    let read_result: Result<(), ConnectionError> = async {
        loop {
            let Some(frame) = frames.next(&mut reader, session.read_limit(idle)).await? else {
                return Ok(());
            };
            // Back-pressure: wait (and stop reading this socket) while the shard holds
            // its budget of unanswered request bytes.
            let kib = (frame.len().div_ceil(1024) as u64).clamp(1, budget_kib);
            let permit = ctx
                .inflight
                .acquire_static_permit(kib)
                .await
                .map_err(|e| ConnectionError::Io(std::io::Error::other(e.to_string())))?;
            // The handler decodes the body and says what its answer may claim; its
            // in-order part runs before the next request is read, the rest concurrently,
            // answered in request order by the writer.
            let claim = frame.len();
            let request = api::decode(frame.freeze(), &session)
                .inspect_err(|e| client.learn_from_error(e))?;
            client.learn(&request);
            let claim = claim.saturating_add(request.answer_bytes_max());
            if !claims.admit(claim).await {
                return Ok(());
            }
            let answer = request.start(Rc::clone(&ctx)).await;
            let task = glommio::spawn_local(answer);
            if tx.send((task, permit, claim)).await.is_err() {
                return Ok(());
            }
            // A failed login: the refusal goes out, then the connection closes.
            if session.closing() {
                return Err(ConnectionError::LoginFailed);
            }
        }
    }
    .await;
    drop(tx);
    let written = write_loop.await;
    read_result?;
    written
}
