//! CreateTopics: validates each topic and adds it to the metadata: each partition's
//! leader on the shard placement picks for it, its other replicas on other hosts.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        create_topics_response::CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    metadata::{
        cluster_state::OFFSETS_TOPIC,
        topic_config::{self, TopicConfigs},
        topic_name,
    },
    security::acl::Operation,
    shard::context::ShardContext,
};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

/// Most partitions one topic may have.
pub const PARTITIONS_MAX: i32 = 10_000;

/// Creates the requested topics, each answered with its own error code.
pub struct CreateTopics;

impl Handler for CreateTopics {
    type Request = CreateTopicsRequest;
    type Response = CreateTopicsResponse;

    fn errors(r: &CreateTopicsResponse, error: &mut dyn FnMut(i16)) {
        r.topics.iter().for_each(|t| error(t.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: CreateTopicsRequest,
    ) -> Reply<CreateTopicsResponse> {
        let ctx: &ShardContext = &ctx;
        let mut response = CreateTopicsResponse::default();
        let access = Access::of(ctx, &call).await;
        let cluster_create = access.cluster(Operation::Create);
        for topic in &req.topics {
            let name = topic.name.0.as_str().to_string();
            let mut result = CreatableTopicResult::default();
            result.name = topic.name.clone();
            let partitions = if topic.num_partitions == -1 {
                ctx.config.default_partitions as i32
            } else {
                topic.num_partitions
            };
            let replication_factor = if topic.replication_factor == -1 {
                ctx.config.default_replication_factor()
            } else {
                topic.replication_factor.max(1) as usize
            };
            let configs: TopicConfigs = topic
                .configs
                .iter()
                .filter_map(|c| {
                    let value = c.value.as_ref()?;
                    Some((c.name.as_str().to_string(), value.as_str().to_string()))
                })
                .collect();
            let refused = if !cluster_create && !access.topic(Operation::Create, &name) {
                Some((
                    ResponseError::TopicAuthorizationFailed,
                    "CREATE on the cluster or the topic is needed".into(),
                ))
            } else if let Err(why) = topic_name::validate(&name) {
                Some((ResponseError::InvalidTopicException, why.to_string()))
            } else if name == OFFSETS_TOPIC {
                // Kafka's refusal: the journal is made by the first FindCoordinator.
                Some((
                    ResponseError::InvalidRequest,
                    format!("Creation of internal topic {OFFSETS_TOPIC} is prohibited."),
                ))
            } else if !topic.assignments.is_empty() {
                Some((
                    ResponseError::InvalidRequest,
                    "manual replica assignment is not supported".into(),
                ))
            } else if !(1..=PARTITIONS_MAX).contains(&partitions) {
                Some((
                    ResponseError::InvalidPartitions,
                    format!("partitions must be within 1..={PARTITIONS_MAX}, got {partitions}"),
                ))
            } else if !(topic.replication_factor == -1
                || (1..=16).contains(&topic.replication_factor))
            {
                Some((
                    ResponseError::InvalidReplicationFactor,
                    format!(
                        "replication factor must be within 1..=16 (or -1), got {}",
                        topic.replication_factor
                    ),
                ))
            } else if let Err(e) = topic_config::validate_all(&configs) {
                Some((ResponseError::InvalidConfig, e.to_string()))
            } else if req.validate_only {
                None
            } else {
                match ctx
                    .registry
                    .create(&name, partitions as u32, replication_factor, configs)
                    .await
                {
                    Ok(info) => {
                        if call.version() >= 7 {
                            result.topic_id = uuid::Uuid::from_bytes(info.id);
                        }
                        tracing::info!(topic = %name, partitions, "created topic");
                        None
                    }
                    Err(e) => Some((e.kafka_error(), e.to_string())),
                }
            };
            match refused {
                Some((error, message)) => {
                    result.error_code = error.code();
                    result.error_message = Some(StrBytes::from_string(message));
                }
                // The partition count and replication factor are in the response from v5.
                None if call.version() >= 5 => {
                    result.num_partitions = partitions;
                    result.replication_factor = replication_factor as i16;
                }
                None => {}
            }
            response.topics.push(result);
        }
        Reply::Respond(response)
    }
}
