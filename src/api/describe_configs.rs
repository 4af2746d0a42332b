//! DescribeConfigs: the settings in force for a topic or a broker, under Kafka's names: a
//! topic's own overrides (AlterConfigs, IncrementalAlterConfigs, CreateTopics) over the
//! broker's settings, which come from its command line and config file.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult},
        DescribeConfigsRequest, DescribeConfigsResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    config::BrokerConfig, metadata::topic_config, security::acl::Operation,
    shard::context::ShardContext,
};

use super::{authorize::Access, Call, Handler, Reply};

/// Kafka's resource type for topics.
const TOPIC: i8 = 2;
/// Kafka's resource type for brokers.
const BROKER: i8 = 4;
/// Kafka's config source for a topic's own override.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
/// Kafka's config source for static broker configuration.
const STATIC_BROKER_CONFIG: i8 = 4;
/// Kafka's config source for a setting nobody set: the broker's built-in default.
const DEFAULT_CONFIG: i8 = 5;

fn duration_ms(d: Option<std::time::Duration>) -> String {
    d.map_or("-1".into(), |d| d.as_millis().to_string())
}

/// The settings that apply to every topic, from the broker's configuration.
fn topic_settings(config: &BrokerConfig) -> Vec<(&'static str, String)> {
    let log = &config.log;
    vec![
        ("cleanup.policy", "delete".into()),
        ("delete.retention.ms", "86400000".into()),
        ("min.compaction.lag.ms", "0".into()),
        ("retention.ms", duration_ms(log.retention_age_max)),
        (
            "retention.bytes",
            log.retention_bytes_max
                .map_or("-1".into(), |b| b.to_string()),
        ),
        ("segment.bytes", log.segment_bytes.to_string()),
        ("segment.ms", duration_ms(log.segment_age_max)),
        ("max.message.bytes", config.message_max_bytes.to_string()),
        ("index.interval.bytes", log.index_interval_bytes.to_string()),
        ("message.timestamp.type", "CreateTime".into()),
        ("min.insync.replicas", "1".into()),
    ]
}

fn broker_settings(config: &BrokerConfig) -> Vec<(&'static str, String)> {
    let mut s = topic_settings(config);
    s.extend([
        ("num.partitions", config.default_partitions.to_string()),
        (
            "auto.create.topics.enable",
            config.auto_create_topics.to_string(),
        ),
        (
            "socket.request.max.bytes",
            config.max_request_bytes.to_string(),
        ),
        ("message.max.bytes", config.message_max_bytes.to_string()),
        ("log.dirs", config.data_dir.display().to_string()),
        (
            "log.flush.interval.ms",
            config.flush_interval.as_millis().to_string(),
        ),
    ]);
    s
}

/// Describes each requested resource, each with its own error code.
pub struct DescribeConfigs;

impl Handler for DescribeConfigs {
    type Request = DescribeConfigsRequest;
    type Response = DescribeConfigsResponse;

    fn errors(r: &DescribeConfigsResponse, error: &mut dyn FnMut(i16)) {
        r.results.iter().for_each(|c| error(c.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: DescribeConfigsRequest,
    ) -> Reply<DescribeConfigsResponse> {
        let ctx: &ShardContext = &ctx;
        let mut response = DescribeConfigsResponse::default();
        let access = Access::of(ctx, &call).await;
        // What each setting would be had nobody set it, to tell Kafka's DEFAULT_CONFIG
        // from STATIC_BROKER_CONFIG (a setting equal to its default reads as unset).
        let defaults = BrokerConfig::default();
        for resource in &req.resources {
            let mut result = DescribeConfigsResult::default();
            result.resource_type = resource.resource_type;
            result.resource_name = resource.resource_name.clone();
            let name = resource.resource_name.as_str();
            let mut overrides = Default::default();
            let settings = match resource.resource_type {
                TOPIC if !access.topic(Operation::DescribeConfigs, name) => {
                    result.error_code = ResponseError::TopicAuthorizationFailed.code();
                    None
                }
                BROKER if !access.cluster(Operation::DescribeConfigs) => {
                    result.error_code = ResponseError::ClusterAuthorizationFailed.code();
                    None
                }
                TOPIC if ctx.registry.get(name).is_some() => {
                    overrides = ctx
                        .registry
                        .get(name)
                        .map(|t| t.configs)
                        .unwrap_or_default();
                    Some((topic_settings(&ctx.config), topic_settings(&defaults)))
                }
                TOPIC => {
                    result.error_code = ResponseError::UnknownTopicOrPartition.code();
                    None
                }
                BROKER if name.is_empty() || name.parse::<i32>().is_ok_and(|b| b == ctx.node) => {
                    Some((broker_settings(&ctx.config), broker_settings(&defaults)))
                }
                _ => {
                    result.error_code = ResponseError::InvalidRequest.code();
                    result.error_message = Some(StrBytes::from_string(format!(
                        "resource type {} named {name:?} is not described",
                        resource.resource_type
                    )));
                    None
                }
            };
            let topic = resource.resource_type == TOPIC;
            let (settings, defaults) = settings.unwrap_or_default();
            for ((key, value), (_, default)) in settings.into_iter().zip(defaults) {
                let wanted = resource
                    .configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.iter().any(|k| k.as_str() == key));
                if wanted {
                    let overridden = overrides.get(key);
                    let mut c = DescribeConfigsResourceResult::default();
                    c.name = StrBytes::from_static_str(key);
                    let source = if overridden.is_some() {
                        DYNAMIC_TOPIC_CONFIG
                    } else if value == default {
                        DEFAULT_CONFIG
                    } else {
                        STATIC_BROKER_CONFIG
                    };
                    c.value = Some(StrBytes::from_string(overridden.cloned().unwrap_or(value)));
                    // A topic's own settings can be altered; the broker's cannot.
                    c.read_only = !(topic && topic_config::KEYS.iter().any(|(k, _)| *k == key));
                    c.config_source = source;
                    result.configs.push(c);
                }
            }
            if resource.resource_type == BROKER && result.error_code == 0 {
                result
                    .configs
                    .extend(super::broker_configs::describe(ctx, name));
            }
            response.results.push(result);
        }
        Reply::Respond(response)
    }
}
