//! CreatePartitions: grows topics. New partitions are placed like every partition (on the
//! shard placement gives them) and opened on first use; clients find them at their next
//! metadata refresh. Partitions are never removed, and manual replica assignment is
//! refused (one host, one replica).

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        create_partitions_response::CreatePartitionsTopicResult, CreatePartitionsRequest,
        CreatePartitionsResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{
    authorize::Access, create_topics::PARTITIONS_MAX, error_code::KafkaError, Call, Handler, Reply,
};

/// Grows each requested topic, each answered with its own error code.
pub struct CreatePartitions;

impl Handler for CreatePartitions {
    type Request = CreatePartitionsRequest;
    type Response = CreatePartitionsResponse;

    fn errors(r: &CreatePartitionsResponse, error: &mut dyn FnMut(i16)) {
        r.results.iter().for_each(|t| error(t.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: CreatePartitionsRequest,
    ) -> Reply<CreatePartitionsResponse> {
        let mut response = CreatePartitionsResponse::default();
        let access = Access::of(&ctx, &call).await;
        for topic in &req.topics {
            let mut result = CreatePartitionsTopicResult::default();
            result.name = topic.name.clone();
            let assigned = topic.assignments.as_ref().is_some_and(|a| !a.is_empty());
            let refused = if !access.topic(Operation::Alter, topic.name.0.as_str()) {
                Some((
                    ResponseError::TopicAuthorizationFailed,
                    "ALTER on the topic is needed".to_string(),
                ))
            } else if assigned {
                Some((
                    ResponseError::InvalidReplicaAssignment,
                    "manual replica assignment is not supported".to_string(),
                ))
            } else if !(1..=PARTITIONS_MAX).contains(&topic.count) {
                Some((
                    ResponseError::InvalidPartitions,
                    format!("partitions must be 1 to {PARTITIONS_MAX}"),
                ))
            } else {
                match ctx
                    .registry
                    .add_partitions(topic.name.0.as_str(), topic.count as u32, req.validate_only)
                    .await
                {
                    Ok(info) => {
                        if !req.validate_only {
                            tracing::info!(topic = %info.name, partitions = info.partitions, "added partitions");
                        }
                        None
                    }
                    Err(e) => Some((e.kafka_error(), e.to_string())),
                }
            };
            if let Some((error, message)) = refused {
                result.error_code = error.code();
                result.error_message = Some(StrBytes::from_string(message));
            }
            response.results.push(result);
        }
        ctx.resync().await;
        Reply::Respond(response)
    }
}
