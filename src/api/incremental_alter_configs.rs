//! IncrementalAlterConfigs: sets, deletes, appends to or subtracts from single topic
//! config overrides, leaving the others as they are (what Kafka's tools send today).
//! A broker's are its replication throttle rates ([`super::broker_configs`]).

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        incremental_alter_configs_response::AlterConfigsResourceResponse,
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    },
    protocol::StrBytes,
};

use crate::{
    metadata::topic_config::{ConfigError, TopicConfigs},
    shard::context::ShardContext,
};

use super::{alter_configs::alter_topic, authorize::Access, broker_configs, Call, Handler, Reply};

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Kafka's resource type for a broker.
const BROKER: i8 = 4;

/// Applies one operation to `configs`. APPEND and SUBTRACT treat the value as a
/// comma-separated list, as Kafka does for list-typed configs.
fn apply(
    configs: &mut TopicConfigs,
    key: &str,
    op: i8,
    value: Option<&str>,
) -> Result<(), ConfigError> {
    let bad = |expected| ConfigError::BadValue {
        key: key.to_string(),
        value: value.unwrap_or("").to_string(),
        expected,
    };
    match op {
        SET => {
            configs.insert(
                key.to_string(),
                value.ok_or_else(|| bad("a value"))?.to_string(),
            );
        }
        DELETE => {
            configs.remove(key);
        }
        APPEND | SUBTRACT => {
            let value = value.ok_or_else(|| bad("a value"))?;
            let mut items: Vec<String> = configs
                .get(key)
                .map(|v| {
                    v.split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            if op == APPEND {
                if !items.iter().any(|i| i == value) {
                    items.push(value.to_string());
                }
            } else {
                items.retain(|i| i != value);
            }
            if items.is_empty() {
                configs.remove(key);
            } else {
                configs.insert(key.to_string(), items.join(","));
            }
        }
        _ => return Err(bad("operation SET, DELETE, APPEND or SUBTRACT")),
    }
    Ok(())
}

/// Changes single overrides of each topic.
pub struct IncrementalAlterConfigs;

impl Handler for IncrementalAlterConfigs {
    type Request = IncrementalAlterConfigsRequest;
    type Response = IncrementalAlterConfigsResponse;

    fn errors(r: &IncrementalAlterConfigsResponse, error: &mut dyn FnMut(i16)) {
        r.responses.iter().for_each(|x| error(x.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: IncrementalAlterConfigsRequest,
    ) -> Reply<IncrementalAlterConfigsResponse> {
        let mut response = IncrementalAlterConfigsResponse::default();
        let access = Access::of(&ctx, &call).await;
        for resource in &req.resources {
            let outcome = if resource.resource_type == BROKER {
                broker_configs::alter(
                    &ctx,
                    &access,
                    resource.resource_name.as_str(),
                    &resource.configs,
                    req.validate_only,
                )
                .await
            } else {
                alter_topic(
                    &ctx,
                    &access,
                    resource.resource_type,
                    resource.resource_name.as_str(),
                    |current| {
                        let mut configs = current.clone();
                        for c in &resource.configs {
                            apply(
                                &mut configs,
                                c.name.as_str(),
                                c.config_operation,
                                c.value.as_ref().map(|v| v.as_str()),
                            )?;
                        }
                        Ok(configs)
                    },
                    req.validate_only,
                )
                .await
            };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_change_only_their_key() {
        let mut c = TopicConfigs::new();
        apply(&mut c, "retention.ms", SET, Some("1000")).unwrap();
        apply(&mut c, "cleanup.policy", APPEND, Some("delete")).unwrap();
        apply(&mut c, "cleanup.policy", APPEND, Some("delete")).unwrap();
        assert_eq!(c.get("cleanup.policy").map(String::as_str), Some("delete"));
        apply(&mut c, "cleanup.policy", SUBTRACT, Some("delete")).unwrap();
        assert!(!c.contains_key("cleanup.policy"));
        apply(&mut c, "retention.ms", DELETE, None).unwrap();
        assert!(c.is_empty());
        assert!(apply(&mut c, "retention.ms", SET, None).is_err());
        assert!(apply(&mut c, "retention.ms", 9, Some("1")).is_err());
    }
}
