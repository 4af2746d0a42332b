//! DescribeQuorum (`kafka-metadata-quorum.sh describe --status / --replication`): the
//! controller quorum that keeps weir's metadata, as its leader sees it, in the terms of
//! Kafka's `__cluster_metadata` partition 0. Voters and observers are named by host id
//! (the id of `weir serve --node-id`, not a shard's node id); the metadata log's
//! offsets are the controller's log indexes plus one. A host forwards the question to
//! the controller leader, as a Kafka broker does; a single host answers as a quorum of
//! one. Needs DESCRIBE on the cluster.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        describe_quorum_response::{Listener, Node, PartitionData, ReplicaState, TopicData},
        BrokerId, DescribeQuorumRequest, DescribeQuorumResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    metadata::controller_link::{QuorumMember, QuorumStatus},
    security::acl::Operation,
    shard::context::ShardContext,
};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

/// The topic Kafka keeps its metadata log in; the one partition DescribeQuorum answers.
const METADATA_TOPIC: &str = "__cluster_metadata";

/// The listener name voters' controller addresses are given under (Kafka's default).
const CONTROLLER_LISTENER: &str = "CONTROLLER";

/// Describes the controller quorum.
pub struct DescribeQuorum;

impl Handler for DescribeQuorum {
    type Request = DescribeQuorumRequest;
    type Response = DescribeQuorumResponse;

    fn errors(r: &DescribeQuorumResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
        r.topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .for_each(|p| error(p.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: DescribeQuorumRequest,
    ) -> Reply<DescribeQuorumResponse> {
        let mut response = DescribeQuorumResponse::default();
        if !Access::of(&ctx, &call).await.cluster(Operation::Describe) {
            response.error_code = ResponseError::ClusterAuthorizationFailed.code();
            return Reply::Respond(response);
        }
        let asks_for_the_metadata_log = matches!(
            req.topics.as_slice(),
            [t] if t.topic_name.0.as_str() == METADATA_TOPIC
                && matches!(t.partitions.as_slice(), [p] if p.partition_index == 0)
        );
        if !asks_for_the_metadata_log {
            // Kafka answers anything else about its metadata log this way.
            response.error_code = ResponseError::UnknownTopicOrPartition.code();
            return Reply::Respond(response);
        }
        let mut partition = PartitionData::default();
        match ctx.registry.describe_quorum().await {
            Ok(quorum) => {
                fill(&mut partition, &quorum);
                response.nodes = nodes(&quorum);
            }
            Err(e) => {
                partition.error_code = e.kafka_error().code();
                partition.error_message = Some(StrBytes::from_string(e.to_string()));
            }
        }
        let mut topic = TopicData::default();
        topic.topic_name = super::topic_name(METADATA_TOPIC);
        topic.partitions.push(partition);
        response.topics.push(topic);
        Reply::Respond(response)
    }
}

/// The partition's quorum fields from what the leader said.
fn fill(partition: &mut PartitionData, quorum: &QuorumStatus) {
    partition.leader_id = BrokerId(broker_id(quorum.leader));
    partition.leader_epoch = i32::try_from(quorum.term).unwrap_or(i32::MAX);
    partition.high_watermark = wire_offset(Some(quorum.high_watermark));
    partition.current_voters = quorum.voters.iter().map(replica_state).collect();
    partition.observers = quorum.observers.iter().map(replica_state).collect();
}

fn replica_state(member: &QuorumMember) -> ReplicaState {
    let mut state = ReplicaState::default();
    state.replica_id = BrokerId(broker_id(member.host));
    state.log_end_offset = wire_offset(member.log_end);
    state.last_fetch_timestamp = member.last_heard_ms.unwrap_or(-1);
    state.last_caught_up_timestamp = member.caught_up_ms.unwrap_or(-1);
    state
}

/// Each voter's controller endpoint (v2's node list).
fn nodes(quorum: &QuorumStatus) -> Vec<Node> {
    quorum
        .voters
        .iter()
        .filter_map(|v| {
            let (host, port) = v.address.as_deref()?.rsplit_once(':')?;
            let mut listener = Listener::default();
            listener.name = StrBytes::from_static_str(CONTROLLER_LISTENER);
            listener.host = StrBytes::from_string(host.trim_matches(['[', ']']).to_string());
            listener.port = port.parse().ok()?;
            let mut node = Node::default();
            node.node_id = BrokerId(broker_id(v.host));
            node.listeners.push(listener);
            Some(node)
        })
        .collect()
}

fn broker_id(host: u64) -> i32 {
    i32::try_from(host).unwrap_or(-1)
}

fn wire_offset(offset: Option<u64>) -> i64 {
    offset.and_then(|o| i64::try_from(o).ok()).unwrap_or(-1)
}
