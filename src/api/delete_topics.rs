//! DeleteTopics: removes topics from the registry; each owning shard then deletes the
//! partitions' data when it notices (at once on its next request, or within 100 ms).

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        delete_topics_response::DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{metadata::registry::RegistryError, shard::context::ShardContext};

use super::{decode_body, encode, Request};

/// Deletes the named topics, each answered with its own error code.
pub async fn handle(ctx: &ShardContext, request: &Request) -> Option<Bytes> {
    let req: DeleteTopicsRequest = decode_body(request)?;
    let mut response = DeleteTopicsResponse::default();
    for name in &req.topic_names {
        let mut result = DeletableTopicResult::default();
        result.name = Some(name.clone());
        match ctx.registry.delete(name.0.as_str()).await {
            Ok(_) => {
                tracing::info!(topic = %name.0.as_str(), "deleted topic");
            }
            Err(RegistryError::Unknown(_)) => {
                result.error_code = ResponseError::UnknownTopicOrPartition.code()
            }
            Err(e) => {
                result.error_code = ResponseError::UnknownServerError.code();
                if request.version() >= 5 {
                    result.error_message = Some(StrBytes::from_string(e.to_string()));
                }
            }
        }
        response.responses.push(result);
    }
    ctx.resync().await;
    encode(request, request.version(), &response)
}
