//! ListPartitionReassignments (`kafka-reassign-partitions.sh --list/--verify`): every
//! partition whose replicas are moving — of the partitions named, or of all — with its
//! replicas now, the ones the move adds and the ones it will remove, as Kafka lists
//! them. A partition not moving (or unknown) is left out. Needs DESCRIBE on the cluster.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        list_partition_reassignments_response::{
            OngoingPartitionReassignment, OngoingTopicReassignment,
        },
        BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, topic_name, Call, Handler, Reply};

/// Lists the replica moves underway.
pub struct ListPartitionReassignments;

impl Handler for ListPartitionReassignments {
    type Request = ListPartitionReassignmentsRequest;
    type Response = ListPartitionReassignmentsResponse;

    fn errors(r: &ListPartitionReassignmentsResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: ListPartitionReassignmentsRequest,
    ) -> Reply<ListPartitionReassignmentsResponse> {
        let mut response = ListPartitionReassignmentsResponse::default();
        if !Access::of(&ctx, &call).await.cluster(Operation::Describe) {
            response.error_code = ResponseError::ClusterAuthorizationFailed.code();
            response.error_message = Some(StrBytes::from_static_str(
                "DESCRIBE on the cluster is needed",
            ));
            return Reply::Respond(response);
        }
        ctx.resync().await;
        let snapshot = ctx.metadata();
        let wanted = |topic: &str, p: i32| {
            req.topics.as_ref().is_none_or(|topics| {
                topics
                    .iter()
                    .any(|t| t.name.0.as_str() == topic && t.partition_indexes.contains(&p))
            })
        };
        for t in snapshot.topics.values() {
            let mut topic = OngoingTopicReassignment::default();
            topic.name = topic_name(&t.name);
            for (p, state) in t.states.iter().enumerate() {
                let index = p as i32;
                let Some(target) = &state.target else {
                    continue;
                };
                if !wanted(&t.name, index) {
                    continue;
                }
                let mut part = OngoingPartitionReassignment::default();
                part.partition_index = index;
                part.replicas = state.replicas.iter().copied().map(BrokerId).collect();
                part.adding_replicas = state.adding.iter().copied().map(BrokerId).collect();
                part.removing_replicas = state
                    .replicas
                    .iter()
                    .filter(|n| !target.contains(n))
                    .copied()
                    .map(BrokerId)
                    .collect();
                topic.partitions.push(part);
            }
            if !topic.partitions.is_empty() {
                response.topics.push(topic);
            }
        }
        Reply::Respond(response)
    }
}
