//! ElectLeaders (`kafka-leader-election.sh`): a preferred election hands each named
//! partition (or every partition) back to its first replica where that replica is live,
//! not draining and in sync; an unclean one gives a partition without a leader to a
//! live replica, in sync if one is, else out of sync (what it missed is lost, as in
//! Kafka). The shard forwards the election to the controller, waits for the metadata
//! that holds it, and answers per partition as Kafka does: NONE when the wanted leader
//! now leads, ELECTION_NOT_NEEDED when it already did (v1+), PREFERRED_LEADER_NOT_AVAILABLE
//! or ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica may take it. Needs ALTER on the
//! cluster.

use std::{collections::BTreeMap, rc::Rc};

use kafka_protocol::{
    messages::{
        elect_leaders_response::{PartitionResult, ReplicaElectionResult},
        ElectLeadersRequest, ElectLeadersResponse, TopicName,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    metadata::{
        cluster_state::{live_node, unfenced_host, HostRecord},
        metadata_change::MetadataChange,
        partition_state::PartitionState,
    },
    security::acl::Operation,
    shard::context::ShardContext,
};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

/// Elects leaders through the controller.
pub struct ElectLeaders;

/// Kafka's election types.
const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

impl Handler for ElectLeaders {
    type Request = ElectLeadersRequest;
    type Response = ElectLeadersResponse;

    fn errors(r: &ElectLeadersResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
        r.replica_election_results
            .iter()
            .flat_map(|t| &t.partition_result)
            .for_each(|p| error(p.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: ElectLeadersRequest,
    ) -> Reply<ElectLeadersResponse> {
        let version = call.header.request_api_version;
        let election_type = if version == 0 {
            PREFERRED
        } else {
            req.election_type
        };
        let asked: Vec<(String, i32)> = match &req.topic_partitions {
            Some(topics) => topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
                .collect(),
            None => ctx
                .registry
                .list()
                .into_iter()
                .flat_map(|t| (0..t.partitions as i32).map(move |p| (t.name.clone(), p)))
                .collect(),
        };
        let refused = if !Access::of(&ctx, &call).await.cluster(Operation::Alter) {
            Some((
                ResponseError::ClusterAuthorizationFailed,
                "ALTER on the cluster is needed",
            ))
        } else if election_type != PREFERRED && election_type != UNCLEAN {
            Some((
                ResponseError::InvalidRequest,
                "the election type is 0 (preferred) or 1 (unclean)",
            ))
        } else {
            None
        };
        let mut results: BTreeMap<(String, i32), Result<(), (ResponseError, String)>> =
            BTreeMap::new();
        if let Some((error, why)) = refused {
            let mut response = answer_with(version, results, false);
            response.error_code = error.code();
            for (topic, partition) in asked {
                push(&mut response, &topic, partition, Err((error, why.into())));
            }
            return Reply::Respond(response);
        }
        let unclean = election_type == UNCLEAN;
        let hosts = ctx.registry.cluster().hosts;
        let mut candidates = Vec::new();
        for (topic, partition) in asked.iter().cloned() {
            let outcome = match state_of(&ctx, &topic, partition) {
                None => Err((
                    ResponseError::UnknownTopicOrPartition,
                    "no such partition".into(),
                )),
                Some(state) => match needed(&state, unclean, &hosts) {
                    Ok(true) => {
                        candidates.push((topic.clone(), partition as u32));
                        Ok(())
                    }
                    Ok(false) => Err((
                        ResponseError::ElectionNotNeeded,
                        "the leader is already the one asked for".into(),
                    )),
                    Err(e) => Err(unavailable(e)),
                },
            };
            results.insert((topic, partition), outcome);
        }
        if !candidates.is_empty() {
            let elected = ctx
                .registry
                .ask_controller(MetadataChange::ElectLeaders {
                    partitions: candidates.clone(),
                    unclean,
                })
                .await;
            let hosts = ctx.registry.cluster().hosts;
            for (topic, partition) in candidates {
                let outcome = match &elected {
                    Err(e) => Err((e.kafka_error(), e.to_string())),
                    Ok(()) => match state_of(&ctx, &topic, partition as i32)
                        .map(|s| needed(&s, unclean, &hosts))
                    {
                        Some(Ok(false)) => Ok(()),
                        Some(Err(e)) => Err(unavailable(e)),
                        Some(Ok(true)) | None => Err(unavailable(if unclean {
                            ResponseError::EligibleLeadersNotAvailable
                        } else {
                            ResponseError::PreferredLeaderNotAvailable
                        })),
                    },
                };
                results.insert((topic, partition as i32), outcome);
            }
            ctx.resync().await;
        }
        Reply::Respond(answer_with(
            version,
            results,
            req.topic_partitions.is_none(),
        ))
    }
}

/// The partition's replication state, if it exists.
pub(super) fn state_of(ctx: &ShardContext, topic: &str, partition: i32) -> Option<PartitionState> {
    let mut info = ctx.registry.get(topic)?;
    info.fill_states();
    usize::try_from(partition)
        .ok()
        .and_then(|p| info.states.get(p).cloned())
}

/// Whether an election of `state` would change its leader (`Ok(true)`), is not needed
/// because the leader asked for already leads (`Ok(false)`), or cannot happen because
/// no replica may take it (the error to answer).
fn needed(
    state: &PartitionState,
    unclean: bool,
    hosts: &BTreeMap<u32, HostRecord>,
) -> Result<bool, ResponseError> {
    if unclean {
        if state.leader.is_some() {
            return Ok(false);
        }
        return if state
            .replicas
            .iter()
            .any(|n| unfenced_host(hosts, *n).is_some())
        {
            Ok(true)
        } else {
            Err(ResponseError::EligibleLeadersNotAvailable)
        };
    }
    match state.preferred() {
        Some(p) if state.leader == Some(p) => Ok(false),
        Some(p) if state.isr.contains(&p) && live_node(hosts, p) => Ok(true),
        _ => Err(ResponseError::PreferredLeaderNotAvailable),
    }
}

fn unavailable(error: ResponseError) -> (ResponseError, String) {
    let why = match error {
        ResponseError::EligibleLeadersNotAvailable => "no replica of it is on a live host",
        _ => "its preferred replica is not live and in sync",
    };
    (error, why.into())
}

/// The response holding `results`; with `all` (no partitions named), only the
/// partitions an election was tried for, as Kafka lists them.
fn answer_with(
    version: i16,
    results: BTreeMap<(String, i32), Result<(), (ResponseError, String)>>,
    all: bool,
) -> ElectLeadersResponse {
    let mut response = ElectLeadersResponse::default();
    for ((topic, partition), outcome) in results {
        let not_needed = matches!(&outcome, Err((ResponseError::ElectionNotNeeded, _)));
        if all && not_needed {
            continue;
        }
        // v0 predates ELECTION_NOT_NEEDED (KIP-460): the leader asked for leads, done.
        let outcome = if version == 0 && not_needed {
            Ok(())
        } else {
            outcome
        };
        push(&mut response, &topic, partition, outcome);
    }
    response
}

fn push(
    response: &mut ElectLeadersResponse,
    topic: &str,
    partition: i32,
    outcome: Result<(), (ResponseError, String)>,
) {
    let results = &mut response.replica_election_results;
    if results.last().is_none_or(|t| t.topic.0.as_str() != topic) {
        let mut t = ReplicaElectionResult::default();
        t.topic = TopicName(StrBytes::from_string(topic.to_string()));
        results.push(t);
    }
    let mut p = PartitionResult::default();
    p.partition_id = partition;
    if let Err((error, why)) = outcome {
        p.error_code = error.code();
        p.error_message = Some(StrBytes::from_string(why));
    }
    if let Some(t) = results.last_mut() {
        t.partition_result.push(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::placement::NodeId;

    const A: NodeId = 1024;
    const B: NodeId = 2048;

    fn hosts(live: &[u32]) -> BTreeMap<u32, HostRecord> {
        [1, 2]
            .into_iter()
            .map(|id| {
                let mut h = HostRecord::for_tests(1);
                h.fenced = !live.contains(&id);
                (id, h)
            })
            .collect()
    }

    #[test]
    fn an_election_is_needed_only_where_it_can_change_the_leader() {
        let mut p = PartitionState::new(vec![A, B]);
        assert_eq!(needed(&p, false, &hosts(&[1, 2])), Ok(false), "A leads");
        p.fence_host(1, |_| true);
        assert_eq!(
            needed(&p, false, &hosts(&[2])),
            Err(ResponseError::PreferredLeaderNotAvailable),
            "A is fenced and out of sync"
        );
        p.alter_isr(1, vec![B, A]).expect("A caught up");
        assert_eq!(needed(&p, false, &hosts(&[1, 2])), Ok(true));
        assert_eq!(needed(&p, true, &hosts(&[1, 2])), Ok(false), "B leads");
        let mut lost = PartitionState::new(vec![A, B]);
        lost.alter_isr(0, vec![A]).expect("B fell behind");
        lost.fence_host(1, |_| true);
        assert_eq!(needed(&lost, true, &hosts(&[2])), Ok(true), "B, unclean");
        assert_eq!(
            needed(&lost, true, &hosts(&[])),
            Err(ResponseError::EligibleLeadersNotAvailable)
        );
    }
}
