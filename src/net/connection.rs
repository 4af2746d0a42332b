//! One client connection: a reader that decodes requests and starts each one's handler
//! at once, and a writer that sends the responses strictly in request order. Requests
//! therefore overlap (a produce waiting for its group commit does not hold up the next
//! request), yet the client sees responses in the order it asked.

use std::rc::Rc;

use bytes::{BufMut, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::{channels::local_channel, net::TcpStream, Task};

use crate::{api, shard::context::ShardContext};

use super::frame::{take_frame, FrameError};

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
    /// The client sent a request the broker cannot parse.
    #[error("undecodable request: {0}")]
    Request(String),
}

/// Serves one connection until the client closes it or misbehaves.
pub async fn serve(ctx: Rc<ShardContext>, stream: TcpStream) -> Result<(), ConnectionError> {
    stream.set_nodelay(true).map_err(std::io::Error::from)?;
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let (tx, rx) = local_channel::new_bounded::<Task<Option<BytesMut>>>(IN_FLIGHT_REQUESTS_MAX);
    let write_loop = glommio::spawn_local(async move {
        while let Some(task) = rx.recv().await {
            if let Some(response) = task.await {
                writer.write_all(&response).await?;
            }
        }
        writer.flush().await?;
        Ok::<(), std::io::Error>(())
    });
    let mut buf = BytesMut::with_capacity(64 << 10);
    let max = ctx.config.max_request_bytes;
    let read_result: Result<(), ConnectionError> = async {
        loop {
            while let Some(frame) = take_frame(&mut buf, max)? {
                let request = api::decode(frame.freeze()).map_err(ConnectionError::Request)?;
                let ctx = Rc::clone(&ctx);
                let task = glommio::spawn_local(async move {
                    let response = api::handle(&ctx, request).await?;
                    let mut out = BytesMut::with_capacity(response.len() + 4);
                    out.put_i32(response.len() as i32);
                    out.extend_from_slice(&response);
                    Some(out)
                });
                if tx.send(task).await.is_err() {
                    return Ok(());
                }
            }
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(64 << 10);
            }
            let spare = buf.capacity() - buf.len();
            let start = buf.len();
            buf.resize(start + spare, 0);
            let n = reader.read(&mut buf[start..]).await?;
            buf.truncate(start + n);
            if n == 0 {
                return Ok(());
            }
        }
    }
    .await;
    drop(tx);
    let written = write_loop.await;
    read_result?;
    written?;
    Ok(())
}
