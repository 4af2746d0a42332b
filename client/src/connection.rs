//! A pipelined Kafka connection on glommio: one task writes requests through a
//! [`RequestWriter`] while another reads the answers, in order, through a
//! [`ResponseReader`], so several requests can be in flight.
//!
//! Kafka answers the requests of one connection in the order they were sent; the reader
//! checks each response's correlation id against the one its caller expects, and bounds
//! every response's length before allocating for it. A connection that failed is not
//! repaired: its owner drops both halves and calls [`connect`] again (a long-lived user,
//! such as a follower fetching from its leader, reconnects the same way after the
//! broker restarts).

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use futures_lite::{
    io::{split, BufReader, ReadHalf, WriteHalf},
    AsyncReadExt, AsyncWriteExt,
};
use kafka_protocol::{messages::SaslAuthenticateRequest, protocol::Request};

use crate::{
    dialer::{Dialer, Stream},
    frame::{decode_response, encode_request, response_length},
    sasl::{Login, SaslLogin, AUTHENTICATE_VERSION, HANDSHAKE_VERSION},
    ClientError, Result,
};

/// Bytes buffered per direction.
const BUFFER_BYTES: usize = 64 << 10;

/// Opens a plain TCP connection to `addr` (`host:port`) and returns its two halves;
/// requests carry `client_id`.
pub async fn connect(
    addr: &str,
    client_id: &'static str,
) -> Result<(RequestWriter, ResponseReader)> {
    connect_with(&Dialer::plaintext(), addr, client_id).await
}

/// Opens a connection to `addr` the way `dialer` says (plain or TLS, logged in with
/// SASL when it has a login) and returns its two halves; requests carry `client_id`.
pub async fn connect_with(
    dialer: &Dialer,
    addr: &str,
    client_id: &'static str,
) -> Result<(RequestWriter, ResponseReader)> {
    let stream = dialer.open(addr).await?;
    let addr: Rc<str> = Rc::from(addr);
    let (read, write) = split(stream);
    let mut writer = RequestWriter {
        addr: addr.clone(),
        half: write,
        frame: BytesMut::with_capacity(BUFFER_BYTES),
        correlation_id: 0,
        client_id,
    };
    let mut reader = ResponseReader {
        addr,
        half: BufReader::with_capacity(BUFFER_BYTES, read),
    };
    if let Some(login) = dialer.sasl() {
        log_in(&mut writer, &mut reader, login).await?;
    }
    Ok((writer, reader))
}

/// Logs in as `login` on a fresh connection: SaslHandshake, then SaslAuthenticate until
/// the mechanism is done. A refusal is [`ClientError::Sasl`] with the broker's message.
pub async fn log_in(
    writer: &mut RequestWriter,
    reader: &mut ResponseReader,
    login: &SaslLogin,
) -> Result<()> {
    let handshake = call(writer, reader, &login.handshake(), HANDSHAKE_VERSION).await?;
    check_handshake(
        writer.addr(),
        login,
        handshake.error_code,
        &handshake.mechanisms,
    )?;
    let (mut steps, mut request) = Login::start(login)?;
    loop {
        let answer: <SaslAuthenticateRequest as Request>::Response =
            call(writer, reader, &request, AUTHENTICATE_VERSION).await?;
        check_authenticate(
            writer.addr(),
            answer.error_code,
            answer.error_message.as_deref(),
        )?;
        match steps.next(&answer.auth_bytes)? {
            Some(next) => request = next,
            None => return Ok(()),
        }
    }
}

/// `Err` when a SaslHandshake was refused: the mechanisms the broker offers instead.
pub(crate) fn check_handshake(
    addr: &str,
    login: &SaslLogin,
    code: i16,
    offered: &[kafka_protocol::protocol::StrBytes],
) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    let offered: Vec<&str> = offered.iter().map(|m| m.as_str()).collect();
    Err(ClientError::Sasl(format!(
        "broker {addr} does not offer {} (offers {offered:?}; error {code})",
        login.mechanism.name()
    )))
}

/// `Err` when a SaslAuthenticate was refused, with the broker's message.
pub(crate) fn check_authenticate(addr: &str, code: i16, message: Option<&str>) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    Err(ClientError::Sasl(format!(
        "broker {addr} refused the login (error {code}): {}",
        message.unwrap_or("-")
    )))
}

/// The sending half: encodes and writes requests.
pub struct RequestWriter {
    addr: Rc<str>,
    half: WriteHalf<Stream>,
    frame: BytesMut,
    correlation_id: i32,
    client_id: &'static str,
}

impl RequestWriter {
    /// Writes `request` at `version` and returns its correlation id once the whole frame
    /// is in the socket.
    pub async fn send<R: Request>(&mut self, request: &R, version: i16) -> Result<i32> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        self.frame.clear();
        encode_request(
            &mut self.frame,
            request,
            version,
            self.correlation_id,
            self.client_id,
        )
        .map_err(ClientError::frame(&self.addr))?;
        self.half
            .write_all(&self.frame)
            .await
            .map_err(ClientError::io(&self.addr))?;
        Ok(self.correlation_id)
    }

    /// The broker this connection goes to.
    pub fn addr(&self) -> &str {
        &self.addr
    }
}

/// The receiving half: reads and decodes responses in order.
pub struct ResponseReader {
    addr: Rc<str>,
    half: BufReader<ReadHalf<Stream>>,
}

impl ResponseReader {
    /// Reads the next response, which must answer request `correlation_id` of type `R`
    /// sent at `version`.
    pub async fn receive<R: Request>(
        &mut self,
        correlation_id: i32,
        version: i16,
    ) -> Result<R::Response> {
        let io = ClientError::io(&self.addr);
        let mut prefix = [0u8; 4];
        self.half.read_exact(&mut prefix).await.map_err(&io)?;
        let length = response_length(prefix).map_err(ClientError::frame(&self.addr))?;
        let mut body = BytesMut::zeroed(length);
        self.half.read_exact(&mut body).await.map_err(&io)?;
        let body: Bytes = body.freeze();
        decode_response::<R>(body, correlation_id, version).map_err(ClientError::frame(&self.addr))
    }
}

/// Sends one request and waits for its response (for set-up calls, not a hot path).
pub async fn call<R: Request>(
    writer: &mut RequestWriter,
    reader: &mut ResponseReader,
    request: &R,
    version: i16,
) -> Result<R::Response> {
    let correlation_id = writer.send(request, version).await?;
    reader.receive::<R>(correlation_id, version).await
}
