//! The Kafka APIs, one file each: decoding a request frame, dispatching it to its
//! handler, and encoding the response. Handlers never fail a whole request for one
//! partition: each partition gets its own Kafka error code.

pub mod api_versions;
pub mod create_topics;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod fetch;
pub mod groups;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod produce;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::{
    messages::{ApiKey, RequestHeader, ResponseHeader},
    protocol::{Decodable, Encodable},
};

use crate::shard::context::ShardContext;

/// A request whose header has been decoded; the body is decoded by its handler.
#[derive(Debug)]
pub struct Request {
    /// The API.
    pub key: ApiKey,
    /// The request header.
    pub header: RequestHeader,
    /// The rest of the frame.
    pub body: Bytes,
}

impl Request {
    /// The API version the client used.
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }
}

/// Decodes a frame's request header. Fails (and the connection is closed, as Kafka
/// does) for unknown API keys, versions this broker does not implement (except for
/// ApiVersions, which answers them), and malformed headers.
pub fn decode(frame: Bytes) -> Result<Request, String> {
    if frame.len() < 8 {
        return Err(format!(
            "request of {} bytes is shorter than a header",
            frame.len()
        ));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| format!("unknown API key {raw_key}"))?;
    let supported =
        api_versions::supported(key).ok_or_else(|| format!("API {key:?} is not supported"))?;
    if key != ApiKey::ApiVersions && !(supported.0..=supported.1).contains(&version) {
        return Err(format!(
            "{key:?} v{version} is not supported (v{}..=v{})",
            supported.0, supported.1
        ));
    }
    // ApiVersions requests above our range are parsed with the newest header we know,
    // so the error response can carry the correlation id.
    let header_version = key.request_header_version(version.min(supported.1));
    let mut body = frame;
    let header = RequestHeader::decode(&mut body, header_version)
        .map_err(|e| format!("bad request header: {e}"))?;
    Ok(Request { key, header, body })
}

/// Encodes a response as it goes on the wire: the length prefix, then the header its
/// API and version call for, then the body, in one buffer sized for it up front (a
/// large fetch response is neither regrown nor copied again to be framed).
pub fn encode<R: Encodable>(request: &Request, version: i16, body: &R) -> Option<Bytes> {
    let mut header = ResponseHeader::default();
    header.correlation_id = request.header.correlation_id;
    let header_version = request.key.response_header_version(version);
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
            tracing::error!(api = ?request.key, version, error = %e, "cannot encode response");
            None
        }
    }
}

/// Decodes a request body, logging why when it cannot.
pub fn decode_body<T: Decodable>(request: &Request) -> Option<T> {
    let mut body = request.body.clone();
    match T::decode(&mut body, request.version()) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(api = ?request.key, version = request.version(), error = %e, "undecodable request body");
            None
        }
    }
}

/// What a connection does after a request.
#[derive(Debug)]
pub enum Outcome {
    /// Send this response (length prefix, header and body: see [`encode`]).
    Respond(Bytes),
    /// Send nothing: a produce with acks=0.
    Silent,
    /// The request body could not be decoded: close the connection, as Kafka does.
    Close,
}

/// Handles one request other than Produce (see [`produce::append`] and
/// [`produce::acknowledge`], which the connection runs in two phases) and Fetch (see
/// [`fetch::Fetch`], whose answer size the connection bounds first).
pub async fn handle(ctx: &ShardContext, request: Request) -> Outcome {
    let response = match request.key {
        ApiKey::ApiVersions => api_versions::handle(&request),
        ApiKey::Metadata => metadata::handle(ctx, &request).await,
        ApiKey::CreateTopics => create_topics::handle(ctx, &request).await,
        ApiKey::DeleteTopics => delete_topics::handle(ctx, &request).await,
        ApiKey::ListOffsets => list_offsets::handle(ctx, &request).await,
        ApiKey::InitProducerId => init_producer_id::handle(ctx, &request).await,
        ApiKey::DescribeCluster => describe_cluster::handle(ctx, &request),
        ApiKey::FindCoordinator => groups::find_coordinator(ctx, &request),
        ApiKey::JoinGroup => groups::join_group(ctx, &request).await,
        ApiKey::SyncGroup => groups::sync_group(ctx, &request).await,
        ApiKey::Heartbeat => groups::heartbeat(ctx, &request),
        ApiKey::LeaveGroup => groups::leave_group(ctx, &request),
        ApiKey::OffsetCommit => groups::offset_commit(ctx, &request).await,
        ApiKey::OffsetFetch => groups::offset_fetch(ctx, &request).await,
        ApiKey::ListGroups => groups::list_groups(ctx, &request),
        ApiKey::DescribeGroups => groups::describe_groups(ctx, &request),
        ApiKey::DeleteGroups => groups::delete_groups(ctx, &request).await,
        ApiKey::DescribeConfigs => describe_configs::handle(ctx, &request),
        // The connection runs these itself: see `produce` and `fetch::Fetch`.
        ApiKey::Produce | ApiKey::Fetch => None,
        other => {
            tracing::warn!(api = ?other, "request for an API that decode() admitted but no handler serves");
            None
        }
    };
    Outcome::from(response)
}

impl From<Option<Bytes>> for Outcome {
    /// A response to send, or `None` (the request could not be answered) to close.
    fn from(response: Option<Bytes>) -> Outcome {
        response.map_or(Outcome::Close, Outcome::Respond)
    }
}

/// A Kafka topic name from a plain string.
pub fn topic_name(name: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(kafka_protocol::protocol::StrBytes::from_string(
        name.to_string(),
    ))
}
