//! AlterConfigs: replaces a topic's config overrides with the ones given (Kafka's
//! non-incremental semantics: keys left out go back to the broker's defaults). Also the
//! one place a topic's new overrides are checked and stored, for IncrementalAlterConfigs
//! too. Broker settings come from the command line and the config file and are not
//! changed over the wire.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        alter_configs_response::AlterConfigsResourceResponse, AlterConfigsRequest,
        AlterConfigsResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    metadata::topic_config::{ConfigError, TopicConfigs},
    security::acl::Operation,
    shard::context::ShardContext,
};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

/// Kafka's resource type for topics.
pub const TOPIC: i8 = 2;

/// Applies `change` to the overrides of the topic `name` (a resource of `resource_type`),
/// checks the result and stores it unless `validate_only`. The Kafka error and message
/// when it is refused.
pub(super) async fn alter_topic(
    ctx: &ShardContext,
    access: &Access,
    resource_type: i8,
    name: &str,
    change: impl Fn(&TopicConfigs) -> Result<TopicConfigs, ConfigError>,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    if resource_type != TOPIC {
        return Err((
            ResponseError::InvalidRequest,
            "only topic configs change over the wire; broker settings come from the command line and the config file".into(),
        ));
    }
    if !access.topic(Operation::AlterConfigs, name) {
        return Err((
            ResponseError::TopicAuthorizationFailed,
            "ALTER_CONFIGS on the topic is needed".into(),
        ));
    }
    match ctx
        .registry
        .alter_configs(name, validate_only, change)
        .await
    {
        Ok(info) => {
            if !validate_only {
                tracing::info!(topic = name, configs = ?info.configs, "topic configs changed");
                ctx.resync().await;
            }
            Ok(())
        }
        Err(e) => Err((e.kafka_error(), e.to_string())),
    }
}

/// Replaces each topic's overrides with the given set.
pub struct AlterConfigs;

impl Handler for AlterConfigs {
    type Request = AlterConfigsRequest;
    type Response = AlterConfigsResponse;

    fn errors(r: &AlterConfigsResponse, error: &mut dyn FnMut(i16)) {
        r.responses.iter().for_each(|x| error(x.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: AlterConfigsRequest,
    ) -> Reply<AlterConfigsResponse> {
        let mut response = AlterConfigsResponse::default();
        let access = Access::of(&ctx, &call).await;
        for resource in &req.resources {
            let name = resource.resource_name.as_str();
            let given: TopicConfigs = resource
                .configs
                .iter()
                .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                .collect();
            let outcome = alter_topic(
                &ctx,
                &access,
                resource.resource_type,
                name,
                |_| Ok(given.clone()),
                req.validate_only,
            )
            .await;
            let mut r = AlterConfigsResourceResponse::default();
            r.resource_type = resource.resource_type;
            r.resource_name = resource.resource_name.clone();
            if let Err((error, message)) = outcome {
                r.error_code = error.code();
                r.error_message = Some(StrBytes::from_string(message));
            }
            response.responses.push(r);
        }
        Reply::Respond(response)
    }
}
