//! A blocking Kafka connection on `std::net`, one request at a time: for the admin
//! commands and the tests, which need no runtime.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use bytes::BytesMut;
use kafka_protocol::{messages::SaslAuthenticateRequest, protocol::Request};

use crate::{
    connection::{check_authenticate, check_handshake},
    frame::{decode_response, encode_request, response_length, FrameError},
    sasl::{Login, SaslLogin, AUTHENTICATE_VERSION, HANDSHAKE_VERSION},
    ClientError, Result,
};

/// How long a call waits for its answer by default.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One connection to one broker (shard).
pub struct Connection {
    addr: String,
    stream: TcpStream,
    correlation_id: i32,
    client_id: &'static str,
}

impl Connection {
    /// Connects to `addr` (`host:port`); a call that gets no answer within
    /// [`READ_TIMEOUT`] fails.
    pub fn open(addr: &str, client_id: &'static str) -> Result<Connection> {
        let io = ClientError::io(addr);
        let stream = TcpStream::connect(addr).map_err(&io)?;
        stream.set_read_timeout(Some(READ_TIMEOUT)).map_err(&io)?;
        Ok(Connection {
            addr: addr.to_string(),
            stream,
            correlation_id: 0,
            client_id,
        })
    }

    /// Connects to `addr` like [`Connection::open`], then logs in as `login` if given.
    pub fn open_as(
        addr: &str,
        client_id: &'static str,
        login: Option<&SaslLogin>,
    ) -> Result<Connection> {
        let mut connection = Connection::open(addr, client_id)?;
        if let Some(login) = login {
            connection.log_in(login)?;
        }
        Ok(connection)
    }

    /// Logs in as `login`: SaslHandshake, then SaslAuthenticate until the mechanism is
    /// done. A refusal is [`ClientError::Sasl`] with the broker's message.
    pub fn log_in(&mut self, login: &SaslLogin) -> Result<()> {
        let handshake = self.call(&login.handshake(), HANDSHAKE_VERSION)?;
        check_handshake(
            &self.addr,
            login,
            handshake.error_code,
            &handshake.mechanisms,
        )?;
        let (mut steps, mut request) = Login::start(login)?;
        loop {
            let answer: <SaslAuthenticateRequest as Request>::Response =
                self.call(&request, AUTHENTICATE_VERSION)?;
            check_authenticate(
                &self.addr,
                answer.error_code,
                answer.error_message.as_deref(),
            )?;
            match steps.next(&answer.auth_bytes)? {
                Some(next) => request = next,
                None => return Ok(()),
            }
        }
    }

    /// Sends `request` at `version` and returns the decoded response.
    pub fn call<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        call_on(
            &mut self.stream,
            request,
            version,
            self.correlation_id,
            self.client_id,
        )
        .map_err(|e| e.at(&self.addr))
    }
}

/// Why a call on a bare stream failed (no address known yet).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The socket failed or closed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The request or response was malformed.
    #[error(transparent)]
    Frame(#[from] FrameError),
}

impl CallError {
    /// The same error, naming the broker at `addr`.
    pub fn at(self, addr: &str) -> ClientError {
        match self {
            CallError::Io(e) => ClientError::io(addr)(e),
            CallError::Frame(e) => ClientError::frame(addr)(e),
        }
    }
}

/// Sends `request` at `version` with `correlation_id` on `stream` and reads its answer:
/// for tests that hold a raw stream to send malformed bytes on it too.
pub fn call_on<R: Request>(
    stream: &mut TcpStream,
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: &'static str,
) -> std::result::Result<R::Response, CallError> {
    let mut frame = BytesMut::new();
    encode_request(&mut frame, request, version, correlation_id, client_id)?;
    stream.write_all(&frame)?;
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix)?;
    let mut body = vec![0u8; response_length(prefix)?];
    stream.read_exact(&mut body)?;
    Ok(decode_response::<R>(body.into(), correlation_id, version)?)
}
