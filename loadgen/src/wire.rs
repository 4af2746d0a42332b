//! A pipelined Kafka connection on glommio: requests are written by one task and
//! responses read, in order, by another, so several requests can be in flight.
//!
//! Kafka answers the requests of one connection in the order they were sent; the
//! reader checks each response's correlation id against the one its caller expects.

use std::rc::Rc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_lite::{
    io::{split, BufReader, ReadHalf, WriteHalf},
    AsyncReadExt, AsyncWriteExt,
};
use glommio::net::TcpStream;
use kafka_protocol::{
    messages::{RequestHeader, ResponseHeader},
    protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes},
};

/// Largest response accepted: a fetch is bounded by the request's max bytes.
pub const RESPONSE_BYTES_MAX: usize = 128 << 20;

/// Why a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The socket failed or the broker closed it.
    #[error("broker {addr}: {error}")]
    Io {
        /// The broker address.
        addr: String,
        /// The error (in the message, not a separate cause, so it is printed once).
        error: std::io::Error,
    },
    /// A request could not be encoded or a response decoded.
    #[error("broker {addr}: {reason}")]
    Protocol {
        /// The broker address.
        addr: String,
        /// What went wrong.
        reason: String,
    },
}

/// Result of a wire operation.
pub type Result<T> = std::result::Result<T, WireError>;

/// Opens a connection to `addr` and returns its two halves.
pub async fn connect(addr: &str) -> Result<(RequestWriter, ResponseReader)> {
    let addr: Rc<str> = Rc::from(addr);
    let io = |source| WireError::Io {
        addr: addr.to_string(),
        error: source,
    };
    let stream = TcpStream::connect(&*addr).await.map_err(|e| io(e.into()))?;
    stream.set_nodelay(true).map_err(|e| io(e.into()))?;
    let (read, write) = split(stream);
    Ok((
        RequestWriter {
            addr: addr.clone(),
            half: write,
            frame: BytesMut::with_capacity(64 << 10),
            correlation_id: 0,
        },
        ResponseReader {
            addr,
            half: BufReader::with_capacity(64 << 10, read),
        },
    ))
}

/// The sending half: encodes and writes requests.
pub struct RequestWriter {
    addr: Rc<str>,
    half: WriteHalf<TcpStream>,
    frame: BytesMut,
    correlation_id: i32,
}

impl RequestWriter {
    /// Writes `request` at `version` and returns its correlation id once the whole frame
    /// is in the socket.
    pub async fn send<R: Request>(&mut self, request: &R, version: i16) -> Result<i32> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        header.client_id = Some(StrBytes::from_static_str("loadgen"));
        self.frame.clear();
        self.frame.put_i32(0);
        header
            .encode(&mut self.frame, R::header_version(version))
            .and_then(|()| request.encode(&mut self.frame, version))
            .map_err(|e| WireError::Protocol {
                addr: self.addr.to_string(),
                reason: format!("encoding {}: {e}", std::any::type_name::<R>()),
            })?;
        let length = (self.frame.len() - 4) as i32;
        self.frame[..4].copy_from_slice(&length.to_be_bytes());
        self.half
            .write_all(&self.frame)
            .await
            .map_err(|source| WireError::Io {
                addr: self.addr.to_string(),
                error: source,
            })?;
        Ok(self.correlation_id)
    }
}

/// The receiving half: reads and decodes responses in order.
pub struct ResponseReader {
    addr: Rc<str>,
    half: BufReader<ReadHalf<TcpStream>>,
}

impl ResponseReader {
    /// Reads the next response, which must answer request `correlation_id` of type `R`
    /// sent at `version`.
    pub async fn receive<R: Request>(
        &mut self,
        correlation_id: i32,
        version: i16,
    ) -> Result<R::Response> {
        let io = |source| WireError::Io {
            addr: self.addr.to_string(),
            error: source,
        };
        let mut length = [0u8; 4];
        self.half.read_exact(&mut length).await.map_err(io)?;
        let length = i32::from_be_bytes(length);
        let protocol = |reason: String| WireError::Protocol {
            addr: self.addr.to_string(),
            reason,
        };
        let length = usize::try_from(length)
            .ok()
            .filter(|&l| l <= RESPONSE_BYTES_MAX)
            .ok_or_else(|| protocol(format!("response length {length}")))?;
        let mut body = BytesMut::zeroed(length);
        self.half.read_exact(&mut body).await.map_err(io)?;
        let mut body: Bytes = body.freeze();
        let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| protocol(format!("response header: {e}")))?;
        if header.correlation_id != correlation_id {
            return Err(protocol(format!(
                "correlation id {} answers request {correlation_id}",
                header.correlation_id
            )));
        }
        let response = R::Response::decode(&mut body, version)
            .map_err(|e| protocol(format!("decoding {}: {e}", std::any::type_name::<R>())))?;
        if body.has_remaining() {
            return Err(protocol(format!(
                "{} bytes left after the response",
                body.remaining()
            )));
        }
        Ok(response)
    }
}

/// Sends one request and waits for its response (for set-up calls, not the hot path).
pub async fn call<R: Request>(
    writer: &mut RequestWriter,
    reader: &mut ResponseReader,
    request: &R,
    version: i16,
) -> Result<R::Response> {
    let correlation_id = writer.send(request, version).await?;
    reader.receive::<R>(correlation_id, version).await
}
