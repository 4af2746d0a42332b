//! Metadata: the brokers (one per shard of every live host, each on its own port, so
//! clients connect straight to the core that owns a partition) and the topics with
//! their leaders. A partition whose host is fenced has no leader until it returns.

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
        cluster_state::OFFSETS_TOPIC,
        partition_state::PartitionState,
        placement::{node_id, NodeId, ShardId},
        registry::{ClusterView, TopicInfo},
        topic_name,
    },
    security::acl::Operation,
    shard::context::ShardContext,
};

use super::{authorize::Access, Call, Handler, Reply, SecurityProtocol};

/// Every shard of every live host as a broker on the listener of `protocol`: node id,
/// advertised host, port. A host without that listener is left out, as Kafka does.
pub fn brokers(
    view: &ClusterView,
    protocol: SecurityProtocol,
) -> impl Iterator<Item = (BrokerId, StrBytes, i32)> + '_ {
    view.hosts
        .iter()
        .filter(|(_, h)| !h.fenced)
        .filter_map(move |(id, h)| protocol.port_of(h).map(|port| (id, h, port)))
        .flat_map(|(id, h, port)| {
            let host = StrBytes::from_string(h.advertise.clone());
            (0..h.shards).map(move |s| {
                (
                    BrokerId(node_id(*id, ShardId(s as usize))),
                    host.clone(),
                    i32::from(port) + s as i32,
                )
            })
        })
}

/// A partition's leader as Metadata reports it: the controller's choice, when its host
/// is live (a fenced host's partitions answer "no leader" even before the controller
/// moved them).
pub fn live_leader(view: &ClusterView, state: &PartitionState) -> Option<NodeId> {
    let node = state.leader?;
    let host = view.hosts.get(&crate::metadata::placement::host_of(node))?;
    (!host.fenced).then_some(node)
}

// Fields a version does not have must keep their defaults, or encoding fails: topic ids
// from v10, leader epochs from v7, the cluster id from v2, the controller from v1.
fn topic_entry(view: &ClusterView, t: &TopicInfo, version: i16) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(super::topic_name(&t.name));
    if version >= 1 {
        topic.is_internal = t.name == OFFSETS_TOPIC;
    }
    if version >= 10 {
        topic.topic_id = uuid::Uuid::from_bytes(t.id);
    }
    let ids = |nodes: &[NodeId]| nodes.iter().map(|n| BrokerId(*n)).collect::<Vec<_>>();
    topic.partitions = t
        .states
        .iter()
        .enumerate()
        .map(|(p, state)| {
            let mut part = MetadataResponsePartition::default();
            part.partition_index = p as i32;
            if version >= 7 {
                part.leader_epoch = state.leader_epoch;
            }
            part.replica_nodes = ids(&state.replicas);
            part.isr_nodes = ids(&state.isr);
            match live_leader(view, state) {
                Some(leader) => part.leader_id = BrokerId(leader),
                None => {
                    part.leader_id = BrokerId(-1);
                    part.error_code = ResponseError::LeaderNotAvailable.code();
                }
            }
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
        ctx.resync().await;
        let snapshot = ctx.metadata();
        let view = &snapshot.view;
        response.brokers = brokers(view, call.session.protocol())
            .map(|(node_id, host, port)| {
                let mut b = MetadataResponseBroker::default();
                b.node_id = node_id;
                b.host = host;
                b.port = port;
                b
            })
            .collect();
        if version >= 2 {
            response.cluster_id = Some(StrBytes::from_string(view.cluster_id.clone()));
        }
        if version >= 1 {
            response.controller_id = BrokerId(view.controller.unwrap_or(-1));
        }
        let all = match &req.topics {
            None => true,
            Some(list) => version == 0 && list.is_empty(),
        };
        // Only topics the principal may describe are listed; one asked for by name and
        // not describable is TOPIC_AUTHORIZATION_FAILED; auto-creation needs CREATE.
        let access = Access::of(ctx, &call).await;
        if all {
            response.topics = snapshot
                .topics
                .values()
                .filter(|t| access.topic(Operation::Describe, &t.name))
                .map(|t| topic_entry(view, t, version))
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
                if !access.topic(Operation::Describe, &name) {
                    response.topics.push(error_entry(
                        &name,
                        ResponseError::TopicAuthorizationFailed.code(),
                    ));
                    continue;
                }
                let creatable =
                    access.cluster(Operation::Create) || access.topic(Operation::Create, &name);
                let found = if allow_create && creatable {
                    ctx.topic_or_create(&name).await
                } else {
                    snapshot.topics.get(&name).cloned()
                };
                response.topics.push(match found {
                    Some(t) => topic_entry(view, &t, version),
                    None => error_entry(&name, ResponseError::UnknownTopicOrPartition.code()),
                });
            }
        }
        Reply::Respond(response)
    }
}
