//! AlterPartitionReassignments (`kafka-reassign-partitions.sh --execute/--cancel`):
//! each named partition's replicas start moving to the target given — the new replicas
//! join and catch up as followers, and once every one of them is in sync the replicas
//! not in the target leave (leadership moving to the target's first in-sync replica if
//! the leader leaves) — or, with no target, the move underway is cancelled and the
//! replicas it added leave. A new target replaces a move underway, as in Kafka.
//!
//! Each partition is checked before anything is asked of the controller and gets
//! Kafka's error when it cannot move: UNKNOWN_TOPIC_OR_PARTITION,
//! INVALID_REPLICA_ASSIGNMENT (no replica, an unknown node, two replicas on one host, or
//! a single host asked to move), INVALID_REPLICATION_FACTOR (v1, when the request does
//! not allow the count to change), NO_REASSIGNMENT_IN_PROGRESS (a cancel with nothing to
//! cancel). Needs ALTER on the cluster.

use std::{collections::BTreeMap, rc::Rc};

use kafka_protocol::{
    messages::{
        alter_partition_reassignments_response::{
            ReassignablePartitionResponse, ReassignableTopicResponse,
        },
        AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    metadata::{
        cluster_state::HostRecord,
        metadata_change::{MetadataChange, ReplicaMove},
        partition_state::PartitionState,
        replica_moves::check_target,
    },
    security::acl::Operation,
    shard::context::ShardContext,
};

use super::{
    authorize::Access, elect_leaders::state_of, error_code::KafkaError, topic_name, Call, Handler,
    Reply,
};

/// Starts and cancels replica moves through the controller.
pub struct AlterPartitionReassignments;

/// One partition's outcome: `Ok` or Kafka's error with why.
type Outcome = Result<(), (ResponseError, String)>;

impl Handler for AlterPartitionReassignments {
    type Request = AlterPartitionReassignmentsRequest;
    type Response = AlterPartitionReassignmentsResponse;

    fn errors(r: &AlterPartitionReassignmentsResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
        r.responses
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| error(p.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: AlterPartitionReassignmentsRequest,
    ) -> Reply<AlterPartitionReassignmentsResponse> {
        let version = call.header.request_api_version;
        // Each move with the partition index as asked (a negative one is unknown).
        let asked: Vec<(ReplicaMove, i32)> = req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let m = ReplicaMove {
                        topic: t.name.0.to_string(),
                        partition: u32::try_from(p.partition_index).unwrap_or(u32::MAX),
                        target: p.replicas.as_ref().map(|r| r.iter().map(|n| n.0).collect()),
                    };
                    (m, p.partition_index)
                })
            })
            .collect();
        let mut response = AlterPartitionReassignmentsResponse::default();
        response.allow_replication_factor_change = req.allow_replication_factor_change;
        if !Access::of(&ctx, &call).await.cluster(Operation::Alter) {
            const WHY: &str = "ALTER on the cluster is needed";
            let error = ResponseError::ClusterAuthorizationFailed;
            response.error_code = error.code();
            response.error_message = Some(StrBytes::from_static_str(WHY));
            for (m, index) in &asked {
                push(&mut response, &m.topic, *index, Err((error, WHY.into())));
            }
            return Reply::Respond(response);
        }
        let allow_resize = version < 1 || req.allow_replication_factor_change;
        // A single host has no other host to move to (None).
        let hosts = ctx
            .registry
            .is_clustered()
            .then(|| ctx.registry.cluster().hosts);
        let mut outcomes: Vec<Outcome> = Vec::with_capacity(asked.len());
        let mut moves = Vec::new();
        for (m, index) in &asked {
            let outcome = match state_of(&ctx, &m.topic, *index) {
                None => Err((
                    ResponseError::UnknownTopicOrPartition,
                    "no such partition".into(),
                )),
                Some(state) => check(hosts.as_ref(), &state, m, allow_resize),
            };
            if outcome.is_ok() {
                moves.push(m.clone());
            }
            outcomes.push(outcome);
        }
        let asked_controller = if moves.is_empty() {
            Ok(())
        } else {
            ctx.registry
                .ask_controller(MetadataChange::Reassign { moves })
                .await
        };
        ctx.resync().await;
        for ((m, index), outcome) in asked.iter().zip(outcomes) {
            let outcome = outcome.and_then(|()| match &asked_controller {
                Err(e) => Err((e.kafka_error(), e.to_string())),
                Ok(()) => applied(state_of(&ctx, &m.topic, *index), m),
            });
            push(&mut response, &m.topic, *index, outcome);
        }
        Reply::Respond(response)
    }
}

/// Whether `m` may be asked of the controller for a partition in `state`, given the
/// cluster's `hosts` (`None` on a single host).
fn check(
    hosts: Option<&BTreeMap<u32, HostRecord>>,
    state: &PartitionState,
    m: &ReplicaMove,
    resize: bool,
) -> Outcome {
    let invalid = |why: String| Err((ResponseError::InvalidReplicaAssignment, why));
    let Some(target) = &m.target else {
        return match state.target {
            Some(_) => Ok(()),
            None => Err((
                ResponseError::NoReassignmentInProgress,
                "no move of this partition is underway".into(),
            )),
        };
    };
    if state.target.is_none() && state.replicas == *target {
        return Ok(());
    }
    let Some(hosts) = hosts else {
        return invalid(
            "a single host keeps each partition where it is: replicas move between the \
             hosts of a cluster"
                .into(),
        );
    };
    check_target(hosts, target).or_else(invalid)?;
    let now = state.target.as_ref().unwrap_or(&state.replicas).len();
    if !resize && target.len() != now {
        return Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "the target has {} replicas, the partition {now}, and the request does \
                 not allow the replication factor to change",
                target.len()
            ),
        ));
    }
    Ok(())
}

/// Whether the controller did what `m` asked, seen in the partition's `state` after it.
fn applied(state: Option<PartitionState>, m: &ReplicaMove) -> Outcome {
    let Some(state) = state else {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            "the partition was deleted".into(),
        ));
    };
    match &m.target {
        None if state.target.is_none() => Ok(()),
        None => Err((
            ResponseError::ReassignmentInProgress,
            "only replicas the move added are in sync: it cannot be cancelled".into(),
        )),
        Some(t) if state.target.as_ref() == Some(t) || state.replicas == *t => Ok(()),
        Some(_) => Err((
            ResponseError::InvalidReplicaAssignment,
            "the controller did not take the target: a replica of the move underway \
             must be in sync for it to be replaced"
                .into(),
        )),
    }
}

fn push(
    response: &mut AlterPartitionReassignmentsResponse,
    topic: &str,
    partition: i32,
    outcome: Outcome,
) {
    let topics = &mut response.responses;
    if topics.last().is_none_or(|t| t.name.0.as_str() != topic) {
        let mut t = ReassignableTopicResponse::default();
        t.name = topic_name(topic);
        topics.push(t);
    }
    let mut p = ReassignablePartitionResponse::default();
    p.partition_index = partition;
    if let Err((error, why)) = outcome {
        p.error_code = error.code();
        p.error_message = Some(StrBytes::from_string(why));
    }
    if let Some(t) = topics.last_mut() {
        t.partitions.push(p);
    }
}
