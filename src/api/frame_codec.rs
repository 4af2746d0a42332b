//! The frame codec between the connection and a handler: a request decoded by its
//! handler and ready to run ([`Decoded`], what the connection holds), why a frame was
//! refused ([`RequestError`]), and the response framed for the wire, in one buffer sized
//! up front.

use std::{future::Future, rc::Rc, time::Instant};

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::LocalBoxFuture;
use kafka_protocol::{
    messages::{ApiKey, ResponseHeader},
    protocol::{Encodable, StrBytes},
};

use super::handler::{BodyError, Call, Handler, Phase, Reply};
use crate::shard::context::ShardContext;

/// Why a request frame was refused. The connection closes after answering what came
/// before it, as Kafka does: the byte stream cannot be trusted past it.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The frame is too short to hold a request header.
    #[error("request of {0} bytes is shorter than a header")]
    Short(usize),
    /// The API key is not one Kafka defines.
    #[error("unknown API key {0}")]
    UnknownKey(i16),
    /// The API is not served by this broker.
    #[error("API {0:?} is not supported")]
    Unsupported(ApiKey),
    /// The version of a served API is outside the versions served.
    #[error("{key:?} v{version} is not supported (v{min}..=v{max}){}", client_id.as_ref().map_or(String::new(), |c| format!(" by client {c:?}")))]
    Version {
        /// The client id the request carried, when its header could be read.
        client_id: Option<String>,
        /// The API.
        key: ApiKey,
        /// The version asked for.
        version: i16,
        /// The lowest served.
        min: i16,
        /// The highest served.
        max: i16,
    },
    /// The request header is malformed.
    #[error("bad request header: {0}")]
    Header(String),
    /// A request other than the login's next step before the client logged in (or after
    /// its login failed).
    #[error("{0:?} before a SASL login")]
    Unauthenticated(ApiKey),
    /// The request body is malformed.
    #[error("undecodable {key:?} v{version} body: {source}")]
    Body {
        /// The API.
        key: ApiKey,
        /// The version.
        version: i16,
        /// Why.
        source: BodyError,
    },
}

/// The framed response: empty to send nothing, `None` when it could not be encoded
/// (the connection then closes).
pub(super) type Framed = Option<Bytes>;

pub(super) type Answer = LocalBoxFuture<'static, Framed>;

/// A request after its in-order phase.
pub(super) enum Started {
    /// Answered: the framed response.
    Framed(Framed),
    /// The rest, yielding the framed response.
    Rest(Answer),
}

/// A request decoded by its handler, ready to run.
pub struct Decoded {
    pub(super) key: ApiKey,
    pub(super) answer_bytes_max: usize,
    /// The header's client id: a shared slice of the frame, not a copy.
    pub(super) client_id: Option<StrBytes>,
    pub(super) client_software: Option<String>,
    pub(super) start: Box<dyn FnOnce(Rc<ShardContext>) -> LocalBoxFuture<'static, Started>>,
}

impl Decoded {
    /// The API.
    pub fn key(&self) -> ApiKey {
        self.key
    }

    /// The most bytes the answer may carry beyond the request's own.
    pub fn answer_bytes_max(&self) -> usize {
        self.answer_bytes_max
    }

    /// The client id the request carried.
    pub fn client_id(&self) -> Option<&str> {
        self.client_id.as_ref().map(|c| c.as_str())
    }

    /// The client software's name and version, if the request said them.
    pub fn client_software(&self) -> Option<&str> {
        self.client_software.as_deref()
    }

    /// Runs the request's in-order part and returns the rest, whose output is the
    /// framed response: empty to send nothing, `None` when it could not be encoded
    /// (the connection then closes).
    pub async fn start(self, ctx: Rc<ShardContext>) -> impl Future<Output = Framed> {
        match (self.start)(ctx).await {
            Started::Framed(framed) => Box::pin(std::future::ready(framed)),
            Started::Rest(rest) => rest,
        }
    }
}

/// Decodes `body` as `H`'s request of `call` (the decoder a [`Route`](super::Route) holds).
pub(super) fn decode_as<H: Handler>(call: Call, body: Bytes) -> Result<Decoded, RequestError> {
    let (key, version) = (call.key, call.version());
    let request = H::decode(version, body).map_err(|source| RequestError::Body {
        key,
        version,
        source,
    })?;
    let answer_bytes_max = H::answer_bytes_max(&request);
    let client_software = H::client_software(&request);
    let client_id = call.header.client_id.clone();
    let decoded_at = Instant::now();
    Ok(Decoded {
        key,
        answer_bytes_max,
        client_id,
        client_software,
        start: Box::new(move |ctx| {
            Box::pin(async move {
                let correlation_id = call.header.correlation_id;
                let counted = Rc::clone(&ctx);
                let frame = move |reply: Reply<H::Response>| {
                    let api = api_name::<H>();
                    counted.metrics.requests.request(api, decoded_at.elapsed());
                    if let Reply::Respond(r) | Reply::RespondAt(_, r) = &reply {
                        H::errors(r, &mut |code| counted.metrics.requests.error(api, code));
                    }
                    match reply {
                        Reply::Respond(r) => encode(key, correlation_id, version, &r),
                        Reply::RespondAt(v, r) => encode(key, correlation_id, v, &r),
                        Reply::Silent => Some(Bytes::new()),
                        Reply::Close => None,
                    }
                };
                match H::start(ctx, call, request).await {
                    Phase::Done(reply) => Started::Framed(frame(reply)),
                    Phase::Rest(rest) => Started::Rest(Box::pin(async move { frame(rest.await) })),
                }
            })
        }),
    })
}

/// The API's name as metrics label it: the handler's type name, which is Kafka's name
/// for the API (`Produce`, `OffsetCommit`, …).
fn api_name<H: Handler>() -> &'static str {
    let full = std::any::type_name::<H>();
    full.rsplit("::").next().unwrap_or(full)
}

/// Encodes a response as it goes on the wire: the length prefix, then the header its
/// API and version call for, then the body, in one buffer sized for it up front (a
/// large fetch response is neither regrown nor copied again to be framed). `None`
/// (logged) when it cannot be encoded.
fn encode<R: Encodable>(key: ApiKey, correlation_id: i32, version: i16, body: &R) -> Option<Bytes> {
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    let header_version = key.response_header_version(version);
    let sized = header
        .compute_size(header_version)
        .and_then(|h| Ok(h + body.compute_size(version)?));
    let mut out = BytesMut::with_capacity(4 + sized.as_ref().map_or(256, |n| *n));
    out.put_i32(0);
    match header
        .encode(&mut out, header_version)
        .and_then(|()| body.encode(&mut out, version))
    {
        Ok(()) => {
            let len = (out.len() - 4) as i32;
            out[..4].copy_from_slice(&len.to_be_bytes());
            Some(out.freeze())
        }
        Err(e) => {
            tracing::error!(api = ?key, version, error = %e, "cannot encode response");
            None
        }
    }
}
