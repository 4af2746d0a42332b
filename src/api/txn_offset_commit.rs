//! TxnOffsetCommit (v0–v5): a transactional producer commits a group's offsets inside
//! its transaction. The group's coordinator keeps them pending — invisible to
//! OffsetFetch — until the transaction's marker commits or drops them
//! (`group::coordinator::txn_offsets`). v3 names the member and generation, fenced as
//! OffsetCommit fences them; from v5 (transactions V2) the group coordinator adds the
//! group to the transaction itself, in place of the client's AddOffsetsToTxn.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        txn_offset_commit_response::{
            TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
        },
        TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    },
    ResponseError,
};

use crate::{
    group::offset_store::{CommittedOffset, PendingTxn},
    security::acl::Operation,
    shard::{context::ShardContext, txn_routing::now_ms},
};

use super::{authorize::Access, error_code::fenced_before, Call, Handler, Reply};

/// TxnOffsetCommit.
pub struct TxnOffsetCommit;

impl Handler for TxnOffsetCommit {
    type Request = TxnOffsetCommitRequest;
    type Response = TxnOffsetCommitResponse;

    fn errors(r: &TxnOffsetCommitResponse, error: &mut dyn FnMut(i16)) {
        for t in &r.topics {
            t.partitions.iter().for_each(|p| error(p.error_code));
        }
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        req: TxnOffsetCommitRequest,
    ) -> Reply<TxnOffsetCommitResponse> {
        let version = call.version();
        let group = req.group_id.0.as_str();
        let access = Access::of(&ctx, &call).await;
        let now = now_ms();
        let mut offsets = Vec::new();
        let mut refused = Vec::new();
        for topic in &req.topics {
            let name = topic.name.0.as_str();
            for p in &topic.partitions {
                match u32::try_from(p.partition_index) {
                    _ if !access.topic(Operation::Read, name) => refused.push((
                        name.to_string(),
                        p.partition_index,
                        ResponseError::TopicAuthorizationFailed,
                    )),
                    Ok(partition) if p.committed_offset >= 0 => offsets.push((
                        name.to_string(),
                        partition,
                        CommittedOffset {
                            offset: p.committed_offset,
                            leader_epoch: p.committed_leader_epoch,
                            generation: req.generation_id,
                            committed_at_ms: now,
                            metadata: p
                                .committed_metadata
                                .as_ref()
                                .map_or(String::new(), |m| m.as_str().to_string()),
                        },
                    )),
                    _ => refused.push((
                        name.to_string(),
                        p.partition_index,
                        ResponseError::InvalidCommitOffsetSize,
                    )),
                }
            }
        }
        let id = req.transactional_id.0.as_str();
        let outcome = if !access.transactional_id(Operation::Write, id) {
            Err(ResponseError::TransactionalIdAuthorizationFailed)
        } else if !access.group(Operation::Read, group) {
            Err(ResponseError::GroupAuthorizationFailed)
        } else {
            match ctx.coordinating(group).await {
                Ok(journal) => {
                    let member = (version >= 3).then(|| {
                        (
                            req.generation_id,
                            req.member_id.as_str(),
                            req.group_instance_id.as_ref().map(|i| i.as_str()),
                        )
                    });
                    // Transactions V2 (v5+): the group joins the transaction here,
                    // without the client's AddOffsetsToTxn.
                    let enrolled = if version >= 5 {
                        let groups = [group.to_string()];
                        ctx.enrol_in_txn(
                            id,
                            crate::ids::ProducerIdentity::new(
                                req.producer_id.0,
                                req.producer_epoch,
                            ),
                            &[],
                            &groups,
                        )
                        .await
                    } else {
                        Ok(())
                    };
                    // A marker that ended the transaction before the offsets are
                    // written (an abort at a bumped epoch) would leave them for the
                    // producer's next COMMIT: the producer is fenced instead.
                    let lock = ctx.coordinator.producer_lock(req.producer_id.0);
                    let _held = lock.acquire().await;
                    let ended = ctx
                        .coordinator
                        .ended_before(req.producer_id.0, req.producer_epoch);
                    match enrolled {
                        Ok(()) if ended => Err(ResponseError::ProducerFenced),
                        Ok(()) => {
                            ctx.coordinator
                                .commit_pending(
                                    group,
                                    member,
                                    PendingTxn {
                                        producer_id: req.producer_id.0,
                                        producer_epoch: req.producer_epoch,
                                        v2: version >= 5,
                                    },
                                    offsets.clone(),
                                    journal,
                                )
                                .await
                        }
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            }
        };
        let code = outcome
            .err()
            .map_or(0, |e| fenced_before(e, version, 3).code());
        let mut response = TxnOffsetCommitResponse::default();
        let answers = offsets
            .iter()
            .map(|(t, p, _)| (t.clone(), *p as i32, code))
            .chain(refused.into_iter().map(|(t, p, e)| (t, p, e.code())));
        for (topic, partition, code) in answers {
            let mut r = TxnOffsetCommitResponsePartition::default();
            r.partition_index = partition;
            r.error_code = code;
            match response
                .topics
                .iter_mut()
                .find(|t| t.name.0.as_str() == topic)
            {
                Some(t) => t.partitions.push(r),
                None => {
                    let mut t = TxnOffsetCommitResponseTopic::default();
                    t.name = super::topic_name(&topic);
                    t.partitions.push(r);
                    response.topics.push(t);
                }
            }
        }
        Reply::Respond(response)
    }
}
