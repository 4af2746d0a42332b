//! The handler contract: what one Kafka API is to the connection ([`Handler`]), the
//! request as a handler sees it ([`Call`]), and what it answers ([`Reply`], in one or
//! two [`Phase`]s). Every file of `api/` but this one, `routes.rs` and
//! `frame_codec.rs` is one API implementing it.

use std::{future::Future, rc::Rc};

use bytes::Bytes;
use kafka_protocol::{
    messages::{ApiKey, RequestHeader},
    protocol::{Decodable, Encodable, Message},
};

use super::session;
use crate::shard::context::ShardContext;

/// One request as its handler sees it: the API and the request header.
#[derive(Debug)]
pub struct Call {
    /// The API.
    pub key: ApiKey,
    /// The request header.
    pub header: RequestHeader,
    /// The connection's listener and login.
    pub session: Rc<session::Session>,
}

/// A listener's security protocol, as Kafka names them: Metadata and FindCoordinator
/// answer with the ports of the listener the client came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// `PLAINTEXT`.
    Plaintext,
    /// `SSL`: TLS.
    Ssl,
}

impl SecurityProtocol {
    /// Shard 0's port of `host` on this listener, if the host serves it.
    pub fn port_of(self, host: &crate::metadata::cluster_state::HostRecord) -> Option<u16> {
        match self {
            SecurityProtocol::Plaintext => Some(host.port),
            SecurityProtocol::Ssl => host.tls_port,
        }
    }
}

impl Call {
    /// The API version the client used.
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }

    /// The client id the request carried, if any.
    pub fn client_id(&self) -> Option<&str> {
        self.header.client_id.as_ref().map(|c| c.as_str())
    }
}

/// What a handler answers.
#[derive(Debug)]
pub enum Reply<R> {
    /// Send this response, encoded at the request's version.
    Respond(R),
    /// Send this response encoded at another version: ApiVersions answers a version it
    /// does not know in v0, as Kafka does, so the client can retry with one it knows.
    RespondAt(i16, R),
    /// Send nothing: a produce with acks=0.
    Silent,
    /// Send nothing and close the connection: a produce with acks=0 that failed, which
    /// Kafka answers this way so the client notices and refreshes its metadata.
    Close,
}

/// What a request's in-order phase leaves: the reply itself, or the rest of the work,
/// which runs concurrently with the connection's later requests.
pub enum Phase<R, F> {
    /// Answered in order; nothing more runs (a login step, a produce with acks=0).
    Done(Reply<R>),
    /// The rest (a produce's wait for durability), answered in request order when done.
    Rest(F),
}

impl<R> Phase<R, std::future::Ready<Reply<R>>> {
    /// The in-order phase answered: `reply` is all there is.
    pub fn done(reply: Reply<R>) -> Self {
        Phase::Done(reply)
    }
}

impl<R, F: Future<Output = Reply<R>>> Phase<R, F> {
    /// The reply, once the rest (if any) is done.
    pub async fn finish(self) -> Reply<R> {
        match self {
            Phase::Done(reply) => reply,
            Phase::Rest(rest) => rest.await,
        }
    }
}

/// One Kafka API as the connection serves it. Handlers run on their shard's thread
/// only, so their futures need not be `Send`.
#[allow(async_fn_in_trait)]
pub trait Handler: 'static {
    /// The request body.
    type Request: Decodable + Message + 'static;
    /// The response body.
    type Response: Encodable + Message + 'static;

    /// Decodes the request body sent at `version`.
    fn decode(version: i16, mut body: Bytes) -> Result<Self::Request, BodyError> {
        Self::Request::decode(&mut body, version).map_err(BodyError::new)
    }

    /// The client software's name and version, if the request says them (ApiVersions
    /// v3+): the connection remembers them for its logs. `None` by default.
    fn client_software(_request: &Self::Request) -> Option<String> {
        None
    }

    /// Calls `error` with every Kafka error code the response carries — its own, and
    /// each topic's, partition's, group's or member's — for the metrics. Zeros may be
    /// passed (they are skipped). Nothing by default.
    fn errors(_response: &Self::Response, _error: &mut dyn FnMut(i16)) {}

    /// The most bytes the answer may carry beyond the request's own; the connection
    /// claims them from its budget before the handler starts. Nothing by default.
    fn answer_bytes_max(_request: &Self::Request) -> usize {
        0
    }

    /// Runs the part of the request that must happen in request order — before the
    /// connection reads its next request — and says what is left (see [`Phase`]). By
    /// default nothing is ordered: all of [`Handler::answer`] is the rest.
    fn start(
        ctx: Rc<ShardContext>,
        call: Call,
        request: Self::Request,
    ) -> impl Future<Output = Phase<Self::Response, impl Future<Output = Reply<Self::Response>> + 'static>>
    {
        std::future::ready(Phase::Rest(Self::answer(ctx, call, request)))
    }

    /// Answers the request, start to finish.
    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        request: Self::Request,
    ) -> Reply<Self::Response>;
}

/// Why a request body could not be decoded: kafka-protocol's reason.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BodyError(pub String);

impl BodyError {
    /// The reason kafka-protocol gave.
    pub fn new(e: impl std::fmt::Display) -> BodyError {
        BodyError(e.to_string())
    }
}
