//! DeleteTopics: removes topics from the registry; each owning shard then deletes the
//! partitions' data when it notices (at once on its next request, or within 100 ms).

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        delete_topics_response::DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    metadata::registry::RegistryError, security::acl::Operation, shard::context::ShardContext,
};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

/// Deletes the named topics, each answered with its own error code.
pub struct DeleteTopics;

impl Handler for DeleteTopics {
    type Request = DeleteTopicsRequest;
    type Response = DeleteTopicsResponse;

    fn errors(r: &DeleteTopicsResponse, error: &mut dyn FnMut(i16)) {
        r.responses.iter().for_each(|t| error(t.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: DeleteTopicsRequest,
    ) -> Reply<DeleteTopicsResponse> {
        let ctx: &ShardContext = &ctx;
        let mut response = DeleteTopicsResponse::default();
        let access = Access::of(ctx, &call).await;
        for name in &req.topic_names {
            let mut result = DeletableTopicResult::default();
            result.name = Some(name.clone());
            if !access.topic(Operation::Delete, name.0.as_str()) {
                result.error_code = ResponseError::TopicAuthorizationFailed.code();
                response.responses.push(result);
                continue;
            }
            match ctx.registry.delete(name.0.as_str()).await {
                Ok(_) => {
                    tracing::info!(topic = %name.0.as_str(), "deleted topic");
                }
                Err(RegistryError::Unknown(_)) => {
                    result.error_code = ResponseError::UnknownTopicOrPartition.code()
                }
                Err(e) => {
                    result.error_code = e.code();
                    if call.version() >= 5 {
                        result.error_message = Some(StrBytes::from_string(e.to_string()));
                    }
                }
            }
            response.responses.push(result);
        }
        ctx.resync().await;
        Reply::Respond(response)
    }
}
