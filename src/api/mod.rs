//! The Kafka APIs, one file each, all of one shape: a [`Handler`] says how its request
//! is decoded, what its answer may claim from the connection's byte budget, what must
//! happen in request order and what may run concurrently, and returns a typed response.
//! [`ROUTES`] is the one table of served APIs and versions: adding an API is a file with
//! a `Handler` and a line there. The connection (`net`) only calls [`decode`] and
//! [`Decoded::start`]; it never names an API.
//!
//! Handlers never fail a whole request for one partition: each partition gets its own
//! Kafka error code, from [`error_code`] for internal errors.

pub mod acl_wire;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod add_partitions_to_txn_brokers;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod authorize;
pub mod broker_configs;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod error_code;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod session;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

use std::{future::Future, rc::Rc, time::Instant};

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::LocalBoxFuture;
use kafka_protocol::{
    messages::{ApiKey, RequestHeader, ResponseHeader},
    protocol::{Decodable, Encodable, Message, StrBytes},
};

use crate::shard::context::ShardContext;

/// Every API this broker serves: its key, lowest and highest version, and handler.
/// ApiVersions answers with this table and [`decode`] refuses anything outside it.
pub const ROUTES: &[Route] = &[
    Route::to::<produce::Produce>(ApiKey::Produce, 3, 12),
    Route::to::<fetch::Fetch>(ApiKey::Fetch, 4, 12),
    Route::to::<list_offsets::ListOffsets>(ApiKey::ListOffsets, 1, 7),
    Route::to::<delete_records::DeleteRecords>(ApiKey::DeleteRecords, 0, 2),
    Route::to::<offset_for_leader_epoch::OffsetForLeaderEpoch>(ApiKey::OffsetForLeaderEpoch, 2, 4),
    Route::to::<metadata::Metadata>(ApiKey::Metadata, 0, 12),
    Route::to::<api_versions::ApiVersions>(ApiKey::ApiVersions, 0, 3),
    Route::to::<create_topics::CreateTopics>(ApiKey::CreateTopics, 2, 7),
    Route::to::<delete_topics::DeleteTopics>(ApiKey::DeleteTopics, 1, 5),
    Route::to::<create_partitions::CreatePartitions>(ApiKey::CreatePartitions, 0, 3),
    Route::to::<init_producer_id::InitProducerId>(ApiKey::InitProducerId, 0, 4),
    Route::to::<describe_configs::DescribeConfigs>(ApiKey::DescribeConfigs, 1, 4),
    Route::to::<alter_configs::AlterConfigs>(ApiKey::AlterConfigs, 0, 2),
    Route::to::<incremental_alter_configs::IncrementalAlterConfigs>(
        ApiKey::IncrementalAlterConfigs,
        0,
        1,
    ),
    Route::to::<describe_cluster::DescribeCluster>(ApiKey::DescribeCluster, 0, 1),
    Route::to::<describe_log_dirs::DescribeLogDirs>(ApiKey::DescribeLogDirs, 1, 4),
    Route::to::<elect_leaders::ElectLeaders>(ApiKey::ElectLeaders, 0, 2),
    Route::to::<describe_quorum::DescribeQuorum>(ApiKey::DescribeQuorum, 0, 2),
    Route::to::<alter_partition_reassignments::AlterPartitionReassignments>(
        ApiKey::AlterPartitionReassignments,
        0,
        1,
    ),
    Route::to::<list_partition_reassignments::ListPartitionReassignments>(
        ApiKey::ListPartitionReassignments,
        0,
        0,
    ),
    Route::to::<find_coordinator::FindCoordinator>(ApiKey::FindCoordinator, 0, 4),
    Route::to::<join_group::JoinGroup>(ApiKey::JoinGroup, 0, 7),
    Route::to::<sync_group::SyncGroup>(ApiKey::SyncGroup, 0, 5),
    Route::to::<heartbeat::Heartbeat>(ApiKey::Heartbeat, 0, 4),
    Route::to::<leave_group::LeaveGroup>(ApiKey::LeaveGroup, 0, 4),
    Route::to::<offset_commit::OffsetCommit>(ApiKey::OffsetCommit, 2, 8),
    Route::to::<offset_fetch::OffsetFetch>(ApiKey::OffsetFetch, 1, 8),
    Route::to::<list_groups::ListGroups>(ApiKey::ListGroups, 0, 4),
    Route::to::<describe_groups::DescribeGroups>(ApiKey::DescribeGroups, 0, 5),
    Route::to::<delete_groups::DeleteGroups>(ApiKey::DeleteGroups, 0, 2),
    Route::to::<offset_delete::OffsetDelete>(ApiKey::OffsetDelete, 0, 0),
    Route::to::<add_partitions_to_txn::AddPartitionsToTxn>(ApiKey::AddPartitionsToTxn, 0, 5),
    Route::to::<add_offsets_to_txn::AddOffsetsToTxn>(ApiKey::AddOffsetsToTxn, 0, 4),
    Route::to::<end_txn::EndTxn>(ApiKey::EndTxn, 0, 5),
    Route::to::<txn_offset_commit::TxnOffsetCommit>(ApiKey::TxnOffsetCommit, 0, 5),
    Route::to::<write_txn_markers::WriteTxnMarkers>(ApiKey::WriteTxnMarkers, 1, 1),
    Route::to::<describe_transactions::DescribeTransactions>(ApiKey::DescribeTransactions, 0, 0),
    Route::to::<list_transactions::ListTransactions>(ApiKey::ListTransactions, 0, 1),
    Route::to::<describe_producers::DescribeProducers>(ApiKey::DescribeProducers, 0, 0),
    Route::to::<create_acls::CreateAcls>(ApiKey::CreateAcls, 1, 3),
    Route::to::<describe_acls::DescribeAcls>(ApiKey::DescribeAcls, 1, 3),
    Route::to::<delete_acls::DeleteAcls>(ApiKey::DeleteAcls, 1, 3),
    Route::to::<sasl_handshake::SaslHandshake>(ApiKey::SaslHandshake, 0, 1),
    Route::to::<sasl_authenticate::SaslAuthenticate>(ApiKey::SaslAuthenticate, 0, 2),
    Route::to::<describe_user_scram_credentials::DescribeUserScramCredentials>(
        ApiKey::DescribeUserScramCredentials,
        0,
        0,
    ),
    Route::to::<alter_user_scram_credentials::AlterUserScramCredentials>(
        ApiKey::AlterUserScramCredentials,
        0,
        0,
    ),
];

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

/// An entry of [`ROUTES`].
pub struct Route {
    /// The API.
    pub key: ApiKey,
    /// The lowest version served.
    pub version_min: i16,
    /// The highest version served.
    pub version_max: i16,
    decode: fn(Call, Bytes) -> Result<Decoded, RequestError>,
}

impl Route {
    /// Serves `key` from `version_min` to `version_max` with `H`. A range that is empty,
    /// or that reaches a version kafka-protocol cannot decode the request or encode the
    /// response at, does not compile ([`ROUTES`] is a constant).
    pub const fn to<H: Handler>(key: ApiKey, version_min: i16, version_max: i16) -> Route {
        assert!(version_min <= version_max, "a route serves no version");
        let (request, response) = (H::Request::VERSIONS, H::Response::VERSIONS);
        assert!(
            request.min <= version_min && version_max <= request.max,
            "a route serves a request version kafka-protocol does not know"
        );
        assert!(
            response.min <= version_min && version_max <= response.max,
            "a route serves a response version kafka-protocol does not know"
        );
        Route {
            key,
            version_min,
            version_max,
            decode: decode_as::<H>,
        }
    }

    /// The route of `key`, if it is served.
    pub fn of(key: ApiKey) -> Option<&'static Route> {
        ROUTES.iter().find(|r| r.key == key)
    }
}

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

/// The framed response: empty to send nothing, `None` when it could not be encoded
/// (the connection then closes).
type Framed = Option<Bytes>;

type Answer = LocalBoxFuture<'static, Framed>;

/// A request after its in-order phase.
enum Started {
    /// Answered: the framed response.
    Framed(Framed),
    /// The rest, yielding the framed response.
    Rest(Answer),
}

/// A request decoded by its handler, ready to run.
pub struct Decoded {
    key: ApiKey,
    answer_bytes_max: usize,
    /// The header's client id: a shared slice of the frame, not a copy.
    client_id: Option<StrBytes>,
    client_software: Option<String>,
    start: Box<dyn FnOnce(Rc<ShardContext>) -> LocalBoxFuture<'static, Started>>,
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

fn decode_as<H: Handler>(call: Call, body: Bytes) -> Result<Decoded, RequestError> {
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

/// Decodes a request frame (without its length prefix) of the connection of `session`:
/// the header, then the body by the API's handler. Refuses unknown API keys, versions
/// this broker does not serve (except for ApiVersions, which answers them), requests
/// the session's login does not admit yet, and malformed headers and bodies.
pub fn decode(frame: Bytes, session: &Rc<session::Session>) -> Result<Decoded, RequestError> {
    if session.expects_raw_token() {
        return Ok(sasl_authenticate::raw_token(frame, Rc::clone(session)));
    }
    if frame.len() < 8 {
        return Err(RequestError::Short(frame.len()));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| RequestError::UnknownKey(raw_key))?;
    let route = Route::of(key).ok_or(RequestError::Unsupported(key))?;
    if !session.admits(key) {
        return Err(RequestError::Unauthenticated(key));
    }
    if key != ApiKey::ApiVersions && !(route.version_min..=route.version_max).contains(&version) {
        // The header is still read, so the operator learns which client it was.
        let header = RequestHeader::decode(
            &mut frame.clone(),
            key.request_header_version(version.clamp(0, route.version_max)),
        );
        return Err(RequestError::Version {
            client_id: header
                .ok()
                .and_then(|h| h.client_id.map(|c| c.as_str().to_string())),
            key,
            version,
            min: route.version_min,
            max: route.version_max,
        });
    }
    // ApiVersions requests above our range are parsed with the newest header we know,
    // so the error response can carry the correlation id.
    let header_version = key.request_header_version(version.min(route.version_max));
    let mut body = frame;
    let header = RequestHeader::decode(&mut body, header_version)
        .map_err(|e| RequestError::Header(e.to_string()))?;
    (route.decode)(
        Call {
            key,
            header,
            session: Rc::clone(session),
        },
        body,
    )
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

/// A Kafka string from a plain one.
pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A Kafka topic name from a plain string.
pub fn topic_name(name: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(str_bytes(name))
}
