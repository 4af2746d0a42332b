//! ApiVersions: which APIs and versions this broker implements. The table below is
//! the single place that says so; `decode` refuses anything outside it.

use bytes::Bytes;
use kafka_protocol::{
    messages::{api_versions_response::ApiVersion, ApiKey, ApiVersionsResponse},
    ResponseError,
};

use super::{encode, Request};

/// Every API this broker serves with its lowest and highest version.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 8),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
];

/// The version range of `key`, if it is served.
pub fn supported(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, min, max)| (*min, *max))
}

/// Answers with the table. A version above ours is answered in v0 with
/// UNSUPPORTED_VERSION, as Kafka does, so the client can retry with one we know.
pub fn handle(request: &Request) -> Option<Bytes> {
    let (_, max) = supported(ApiKey::ApiVersions)?;
    let mut response = ApiVersionsResponse::default();
    response.api_keys = SUPPORTED
        .iter()
        .map(|(key, min, max)| {
            let mut v = ApiVersion::default();
            v.api_key = *key as i16;
            v.min_version = *min;
            v.max_version = *max;
            v
        })
        .collect();
    let version = if request.version() > max {
        response.error_code = ResponseError::UnsupportedVersion.code();
        0
    } else {
        request.version()
    };
    encode(request, version, &response)
}
