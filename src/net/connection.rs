//! One client connection: a reader that decodes requests and starts each one's handler
//! at once, and a writer that sends the responses strictly in request order. Requests
//! therefore overlap (a produce waiting for its group commit does not hold up the next
//! request), yet the client sees responses in the order it asked.

use std::rc::Rc;

use bytes::{BufMut, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::{channels::local_channel, net::TcpStream, sync::StaticPermit, Task};

use kafka_protocol::messages::ApiKey;

use crate::{
    api::{self, produce, Outcome},
    shard::context::ShardContext,
};

use super::frame::{take_frame, FrameError};

/// Bytes read from the socket per read call.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// Requests of one connection being handled at once; past this the reader waits.
const IN_FLIGHT_REQUESTS_MAX: usize = 64;

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
    Idle(std::time::Duration),
    /// The client sent a request the broker cannot parse.
    #[error("undecodable request: {0}")]
    Request(String),
}

/// The bytes to send for an outcome: the length-prefixed response, nothing (empty), or
/// `None` to close the connection.
fn framed(outcome: Outcome) -> Option<BytesMut> {
    match outcome {
        Outcome::Respond(response) => {
            let mut out = BytesMut::with_capacity(response.len() + 4);
            out.put_i32(response.len() as i32);
            out.extend_from_slice(&response);
            Some(out)
        }
        Outcome::Silent => Some(BytesMut::new()),
        Outcome::Close => None,
    }
}

/// Serves one connection until the client closes it or misbehaves.
pub async fn serve(ctx: Rc<ShardContext>, stream: TcpStream) -> Result<(), ConnectionError> {
    stream.set_nodelay(true).map_err(std::io::Error::from)?;
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let (tx, rx) = local_channel::new_bounded::<(Task<Option<BytesMut>>, StaticPermit)>(
        IN_FLIGHT_REQUESTS_MAX,
    );
    let write_loop = glommio::spawn_local(async move {
        while let Some((task, permit)) = rx.recv().await {
            match task.await {
                Some(response) if !response.is_empty() => writer.write_all(&response).await?,
                Some(_) => {}
                None => {
                    // An undecodable request: the stream cannot be trusted past it.
                    writer.close().await?;
                    return Ok(());
                }
            }
            // The request's bytes count against the shard until its answer is sent.
            drop(permit);
        }
        writer.flush().await?;
        Ok::<(), std::io::Error>(())
    });
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    // Reads land here, then only the bytes received are copied into `buf`: growing
    // `buf` for each read would zero its whole spare capacity every time.
    let mut scratch = vec![0u8; READ_CHUNK_BYTES].into_boxed_slice();
    let max = ctx.config.max_request_bytes;
    let budget_kib = ctx.config.inflight_bytes_max.div_ceil(1024) as u64;
    let read_result: Result<(), ConnectionError> = async {
        loop {
            while let Some(frame) = take_frame(&mut buf, max)? {
                // Back-pressure: wait (and stop reading this socket) while the shard
                // holds its budget of unanswered request bytes.
                let kib = (frame.len().div_ceil(1024) as u64).clamp(1, budget_kib);
                let permit = ctx
                    .inflight
                    .acquire_static_permit(kib)
                    .await
                    .map_err(|e| ConnectionError::Io(std::io::Error::other(e.to_string())))?;
                let request = api::decode(frame.freeze()).map_err(ConnectionError::Request)?;
                let ctx = Rc::clone(&ctx);
                let task = if request.key == ApiKey::Produce {
                    // Appends happen here, in request order; only the wait for the
                    // group commit overlaps with later requests.
                    let appended = produce::append(&ctx, &request).await;
                    glommio::spawn_local(async move {
                        match appended {
                            Some(a) => framed(produce::acknowledge(&request, a).await),
                            None => None,
                        }
                    })
                } else {
                    glommio::spawn_local(async move { framed(api::handle(&ctx, request).await) })
                };
                if tx.send((task, permit)).await.is_err() {
                    return Ok(());
                }
            }
            let idle = ctx.config.idle_timeout;
            let n =
                futures_lite::future::or(async { Some(reader.read(&mut scratch).await) }, async {
                    glommio::timer::sleep(idle).await;
                    None
                })
                .await
                .ok_or(ConnectionError::Idle(idle))??;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&scratch[..n]);
        }
    }
    .await;
    drop(tx);
    let written = write_loop.await;
    read_result?;
    written?;
    Ok(())
}
