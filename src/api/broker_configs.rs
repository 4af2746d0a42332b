//! A broker's dynamic configs, as IncrementalAlterConfigs changes them and
//! DescribeConfigs shows them. weir's broker settings come from `weir serve`, except the
//! replication throttle rates (`leader.replication.throttled.rate`,
//! `follower.replication.throttled.rate`), which the cluster metadata keeps per node id
//! or for every broker (the resource named `""`), as `kafka-reassign-partitions.sh
//! --throttle` and `kafka-configs.sh` set them. Deleting any other key changes nothing
//! — what the reassignment tool sends to clear throttles weir has no notion of — and
//! setting one is refused.

use kafka_protocol::{
    messages::{
        describe_configs_response::DescribeConfigsResourceResult,
        incremental_alter_configs_request::AlterableConfig,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    metadata::{
        metadata_change::MetadataChange,
        replication_throttle::{broker_value, ALL_BROKERS},
    },
    security::acl::Operation,
    shard::context::ShardContext,
};

use super::{authorize::Access, error_code::KafkaError};

const SET: i8 = 0;
const DELETE: i8 = 1;

/// Kafka's config source for a broker's own dynamic config.
const DYNAMIC_BROKER_CONFIG: i8 = 2;
/// Kafka's config source for the dynamic default of every broker.
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;

/// The node id a broker resource names: `""` is every broker's default.
fn node_of(name: &str) -> Result<i32, (ResponseError, String)> {
    if name.is_empty() {
        return Ok(ALL_BROKERS);
    }
    name.parse::<i32>().ok().filter(|n| *n >= 0).ok_or_else(|| {
        (
            ResponseError::InvalidRequest,
            format!("{name:?} is not a broker id"),
        )
    })
}

/// Applies IncrementalAlterConfigs `configs` to broker resource `name`.
pub async fn alter(
    ctx: &ShardContext,
    access: &Access,
    name: &str,
    configs: &[AlterableConfig],
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    if !access.cluster(Operation::AlterConfigs) {
        return Err((
            ResponseError::ClusterAuthorizationFailed,
            "ALTER_CONFIGS on the cluster is needed".into(),
        ));
    }
    let node = node_of(name)?;
    let current = ctx.registry.cluster().throttles.of(node);
    let mut set = Vec::new();
    for c in configs {
        let key = c.name.as_str();
        match c.config_operation {
            DELETE if current.contains_key(key) => set.push((key.to_string(), None)),
            DELETE => {}
            SET => {
                let value = c.value.as_ref().map_or("", |v| v.as_str());
                let rate =
                    broker_value(key, value).map_err(|why| (ResponseError::InvalidConfig, why))?;
                set.push((key.to_string(), Some(rate)));
            }
            op => {
                return Err((
                    ResponseError::InvalidConfig,
                    format!("{key}: operation {op} does not apply to a broker's rates"),
                ))
            }
        }
    }
    if set.is_empty() || validate_only {
        return Ok(());
    }
    if !ctx.registry.is_clustered() {
        return Err((
            ResponseError::InvalidRequest,
            "a single host replicates nothing: replication throttles need a cluster".into(),
        ));
    }
    ctx.registry
        .ask_controller(MetadataChange::SetBrokerThrottles { node, set })
        .await
        .map_err(|e| (e.kafka_error(), e.to_string()))
}

/// The dynamic configs of broker resource `name` (its own, or every broker's default
/// for `""`) for DescribeConfigs.
pub fn describe(ctx: &ShardContext, name: &str) -> Vec<DescribeConfigsResourceResult> {
    let Ok(node) = node_of(name) else {
        return Vec::new();
    };
    let source = if node == ALL_BROKERS {
        DYNAMIC_DEFAULT_BROKER_CONFIG
    } else {
        DYNAMIC_BROKER_CONFIG
    };
    ctx.registry
        .cluster()
        .throttles
        .of(node)
        .into_iter()
        .map(|(key, rate)| {
            let mut c = DescribeConfigsResourceResult::default();
            c.name = StrBytes::from_string(key);
            c.value = Some(StrBytes::from_string(rate.to_string()));
            c.config_source = source;
            c
        })
        .collect()
}
