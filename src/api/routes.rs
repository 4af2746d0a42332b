//! The route table: every Kafka API this broker serves, its versions and its handler,
//! one line each ([`ROUTES`]; ApiVersions answers from it), and [`decode`], which reads
//! a request's header and hands its body to the route's handler.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::{
    messages::{ApiKey, RequestHeader},
    protocol::{Decodable, Message},
};

use super::*;
use super::{
    frame_codec::{decode_as, Decoded, RequestError},
    handler::{Call, Handler},
    sasl_authenticate, session,
};

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
