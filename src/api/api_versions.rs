//! ApiVersions: which APIs and versions this broker serves, read from the one table of
//! them, [`super::ROUTES`].

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey},
        ApiVersionsRequest, ApiVersionsResponse,
    },
    protocol::{Decodable, StrBytes},
    ResponseError,
};

use crate::shard::context::ShardContext;

use super::{BodyError, Call, Handler, Reply, Route, ROUTES};

/// The feature flags this broker has, each finalized at its highest level: Kafka's
/// `transaction.version` 2 is transactions V2 (KIP-890 part 2: an epoch bump per
/// transaction, partitions enrolled by their leaders), which Kafka's 4.x clients use
/// when it is finalized.
const FEATURES: [(&str, i16); 1] = [("transaction.version", 2)];

/// The epoch of the finalized features above (they never change while a broker runs).
const FINALIZED_FEATURES_EPOCH: i64 = 1;

/// The highest ApiVersions version served (its entry in [`ROUTES`]).
fn version_max() -> i16 {
    ROUTES
        .iter()
        .find(|r| r.key == kafka_protocol::messages::ApiKey::ApiVersions)
        .map_or(0, |r: &Route| r.version_max)
}

/// Answers with the table. A version above ours is answered in v0 with
/// UNSUPPORTED_VERSION, as Kafka does, so the client can retry with one we know; its
/// body, in a format we do not know, is not decoded.
pub struct ApiVersions;

impl Handler for ApiVersions {
    type Request = ApiVersionsRequest;
    type Response = ApiVersionsResponse;

    fn errors(r: &ApiVersionsResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    fn decode(version: i16, mut body: Bytes) -> Result<ApiVersionsRequest, BodyError> {
        if version > version_max() {
            return Ok(ApiVersionsRequest::default());
        }
        ApiVersionsRequest::decode(&mut body, version).map_err(BodyError::new)
    }

    fn client_software(request: &ApiVersionsRequest) -> Option<String> {
        let name = request.client_software_name.as_str();
        (!name.is_empty()).then(|| format!("{name} {}", request.client_software_version.as_str()))
    }

    async fn answer(
        _ctx: Rc<ShardContext>,
        call: Call,
        _request: ApiVersionsRequest,
    ) -> Reply<ApiVersionsResponse> {
        let mut response = ApiVersionsResponse::default();
        response.api_keys = ROUTES
            .iter()
            .map(|route| {
                let mut v = ApiVersion::default();
                v.api_key = route.key as i16;
                v.min_version = route.version_min;
                v.max_version = route.version_max;
                v
            })
            .collect();
        for (name, level) in FEATURES {
            let mut supported = SupportedFeatureKey::default();
            supported.name = StrBytes::from_static_str(name);
            supported.min_version = 0;
            supported.max_version = level;
            response.supported_features.push(supported);
            let mut finalized = FinalizedFeatureKey::default();
            finalized.name = StrBytes::from_static_str(name);
            finalized.min_version_level = level;
            finalized.max_version_level = level;
            response.finalized_features.push(finalized);
        }
        response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH;
        if call.version() > version_max() {
            response.error_code = ResponseError::UnsupportedVersion.code();
            return Reply::RespondAt(0, response);
        }
        Reply::Respond(response)
    }
}
