//! A blocking Kafka client connection for the admin commands: encodes a request with
//! kafka-protocol, sends it, and decodes the response with its correlation id checked.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use bytes::{Buf, BytesMut};
use kafka_protocol::{
    messages::{RequestHeader, ResponseHeader},
    protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes},
};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The socket failed or closed.
    #[error("{addr}: {source}")]
    Io {
        /// The broker address.
        addr: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The request could not be encoded or the response decoded.
    #[error("{addr}: {reason}")]
    Protocol {
        /// The broker address.
        addr: String,
        /// What went wrong.
        reason: String,
    },
}

/// Largest response accepted.
const RESPONSE_BYTES_MAX: usize = 256 << 20;

/// One connection to one broker (shard).
pub struct Connection {
    addr: String,
    stream: TcpStream,
    correlation_id: i32,
}

impl Connection {
    /// Connects to `addr` (`host:port`).
    pub fn open(addr: &str) -> Result<Connection, WireError> {
        let io = |source| WireError::Io {
            addr: addr.to_string(),
            source,
        };
        let stream = TcpStream::connect(addr).map_err(io)?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(io)?;
        Ok(Connection {
            addr: addr.to_string(),
            stream,
            correlation_id: 0,
        })
    }

    /// Sends `request` at `version` and returns the decoded response.
    pub fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, WireError> {
        self.correlation_id += 1;
        let protocol = |reason: String| WireError::Protocol {
            addr: self.addr.clone(),
            reason,
        };
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        header.client_id = Some(StrBytes::from_static_str("weir-admin"));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .and_then(|()| request.encode(&mut body, version))
            .map_err(|e| protocol(e.to_string()))?;
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        let io = |source| WireError::Io {
            addr: self.addr.clone(),
            source,
        };
        self.stream.write_all(&frame).map_err(io)?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).map_err(io)?;
        let len = i32::from_be_bytes(len);
        if len < 0 || len as usize > RESPONSE_BYTES_MAX {
            return Err(protocol(format!("response length {len}")));
        }
        let mut response = vec![0u8; len as usize];
        self.stream.read_exact(&mut response).map_err(io)?;
        let mut buf = bytes::Bytes::from(response);
        let header = ResponseHeader::decode(&mut buf, R::Response::header_version(version))
            .map_err(|e| protocol(e.to_string()))?;
        if header.correlation_id != self.correlation_id {
            return Err(protocol(format!(
                "correlation id {} answers request {}",
                header.correlation_id, self.correlation_id
            )));
        }
        let decoded =
            R::Response::decode(&mut buf, version).map_err(|e| protocol(e.to_string()))?;
        if buf.remaining() != 0 {
            return Err(protocol(format!(
                "{} bytes left after the response",
                buf.remaining()
            )));
        }
        Ok(decoded)
    }
}
