//! Metadata: the brokers (one per shard, each on its own port, so clients connect
//! straight to the core that owns a partition) and the topics with their leaders.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        metadata_response::{
            MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
        },
        BrokerId, MetadataRequest, MetadataResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    metadata::{
        placement::{partition_shard, shard_addr, ShardId},
        registry::TopicInfo,
        topic_name,
    },
    shard::context::ShardContext,
};

use super::{Call, Handler, Reply};

/// The cluster id every response carries.
pub const CLUSTER_ID: &str = "weir";

/// Every shard as a broker: node id, advertised host, port.
pub fn brokers(ctx: &ShardContext) -> impl Iterator<Item = (BrokerId, StrBytes, i32)> + '_ {
    (0..ctx.config.shards).map(|s| {
        (
            BrokerId(s as i32),
            StrBytes::from_string(ctx.config.advertise.clone()),
            i32::from(shard_addr(ctx.config.listen, ShardId(s)).port()),
        )
    })
}

// Fields a version does not have must keep their defaults, or encoding fails: topic ids
// from v10, leader epochs from v7, the cluster id from v2, the controller from v1.
fn topic_entry(ctx: &ShardContext, t: &TopicInfo, version: i16) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(super::topic_name(&t.name));
    if version >= 10 {
        topic.topic_id = uuid::Uuid::from_bytes(t.id);
    }
    topic.partitions = (0..t.partitions)
        .map(|p| {
            let leader = BrokerId(partition_shard(&t.name, p, ctx.config.shards).0 as i32);
            let mut part = MetadataResponsePartition::default();
            part.partition_index = p as i32;
            part.leader_id = leader;
            if version >= 7 {
                part.leader_epoch = 0;
            }
            part.replica_nodes = vec![leader];
            part.isr_nodes = vec![leader];
            part
        })
        .collect();
    topic
}

fn error_entry(name: &str, code: i16) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(super::topic_name(name));
    topic.error_code = code;
    topic
}

/// Answers a Metadata request, auto-creating requested topics when allowed.
pub struct Metadata;

impl Handler for Metadata {
    type Request = MetadataRequest;
    type Response = MetadataResponse;

    fn errors(r: &MetadataResponse, error: &mut dyn FnMut(i16)) {
        for t in &r.topics {
            error(t.error_code);
            t.partitions.iter().for_each(|p| error(p.error_code));
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: MetadataRequest,
    ) -> Reply<MetadataResponse> {
        let ctx: &ShardContext = &ctx;
        let version = call.version();
        let mut response = MetadataResponse::default();
        response.brokers = brokers(ctx)
            .map(|(node_id, host, port)| {
                let mut b = MetadataResponseBroker::default();
                b.node_id = node_id;
                b.host = host;
                b.port = port;
                b
            })
            .collect();
        if version >= 2 {
            response.cluster_id = Some(StrBytes::from_static_str(CLUSTER_ID));
        }
        if version >= 1 {
            response.controller_id = BrokerId(0);
        }
        let all = match &req.topics {
            None => true,
            Some(list) => version == 0 && list.is_empty(),
        };
        if all {
            response.topics = ctx
                .registry
                .list()
                .iter()
                .map(|t| topic_entry(ctx, t, version))
                .collect();
        } else {
            let allow_create = version < 4 || req.allow_auto_topic_creation;
            for requested in req.topics.iter().flatten() {
                let Some(name) = requested.name.as_ref().map(|n| n.0.as_str().to_string()) else {
                    response
                        .topics
                        .push(error_entry("", ResponseError::UnknownTopicId.code()));
                    continue;
                };
                if let Err(why) = topic_name::validate(&name) {
                    tracing::debug!(topic = %name, why = %why, "metadata for an invalid topic name");
                    response.topics.push(error_entry(
                        &name,
                        ResponseError::InvalidTopicException.code(),
                    ));
                    continue;
                }
                let found = if allow_create {
                    ctx.topic_or_create(&name).await
                } else {
                    ctx.registry.get(&name)
                };
                response.topics.push(match found {
                    Some(t) => topic_entry(ctx, &t, version),
                    None => error_entry(&name, ResponseError::UnknownTopicOrPartition.code()),
                });
            }
        }
        Reply::Respond(response)
    }
}
