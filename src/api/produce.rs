//! Produce: validates each partition's record batches, appends them to the partition's
//! log stamped with the leader epoch and, unless acks=0, answers once they are durable:
//! here for acks=1, on every in-sync replica for acks=all (refused up front with
//! NOT_ENOUGH_REPLICAS when fewer than `min.insync.replicas` are in sync). Every
//! partition of the request is appended before any durability wait, so one group
//! commit covers them all.

use std::{future::Future, rc::Rc};

use bytes::Bytes;
use futures_util::future::join_all;
use kafka_protocol::{
    messages::{
        produce_response::{PartitionProduceResponse, TopicProduceResponse},
        ProduceRequest, ProduceResponse,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::{
    security::acl::Operation,
    shard::context::ShardContext,
    shard::metadata_view::Leadership,
    storage::{
        batch_records,
        partition_log::{Durable, Wait},
        Offset, PartitionLog, ProducePayload,
    },
};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Phase, Reply};

enum Pending {
    Failed(ResponseError, Option<String>),
    Appended {
        base: Offset,
        log_start: Offset,
        durable: Durable,
        partition: u32,
        /// acks=all on a replicated partition: the ISR is checked again once committed.
        replicated: bool,
        records: u64,
        bytes: u64,
    },
}

/// What one partition's batches are appended as: `acks`, and whether the request names
/// a transactional id.
#[derive(Clone, Copy)]
struct AppendAs {
    acks: i16,
    transactional: bool,
}

/// One partition's batches, checked and ready to append.
struct Staged {
    log: PartitionLog,
    leadership: Leadership,
    payload: ProducePayload,
    partition: u32,
}

/// Checks one partition's batches: this shard leads it (with enough replicas in sync
/// for acks=all), and the batches are valid for the topic.
async fn stage_one(
    ctx: &ShardContext,
    how: AppendAs,
    topic: &str,
    partition: i32,
    records: Option<&Bytes>,
) -> Result<Staged, Pending> {
    let AppendAs {
        acks,
        transactional,
    } = how;
    let log = ctx
        .partition(topic, partition)
        .await
        .map_err(|e| Pending::Failed(e.kafka_error(), None))?;
    let Some(leadership) = ctx.leadership(topic, partition as u32) else {
        return Err(Pending::Failed(ResponseError::NotLeaderOrFollower, None));
    };
    if acks == -1 && leadership.isr < leadership.min_insync {
        return Err(Pending::Failed(
            ResponseError::NotEnoughReplicas,
            Some(format!(
                "{} in-sync replicas, min.insync.replicas is {}",
                leadership.isr, leadership.min_insync
            )),
        ));
    }
    let records = records.cloned().unwrap_or_default();
    if records.len() as u64 > ctx.config.log.segment_bytes {
        return Err(Pending::Failed(ResponseError::RecordListTooLarge, None));
    }
    let rules = ctx.produce_rules(topic);
    let mut payload = ProducePayload::validate(records, rules.message_max_bytes)
        .map_err(|e| Pending::Failed(e.kafka_error(), Some(e.to_string())))?;
    if let Some(refusal) = misplaced(&payload, transactional) {
        return Err(Pending::Failed(ResponseError::InvalidRecord, Some(refusal)));
    }
    if rules.keys_required {
        if let Some(refusal) = keyless(&payload) {
            return Err(Pending::Failed(ResponseError::InvalidRecord, Some(refusal)));
        }
    }
    if rules.log_append_time {
        // The broker's time goes into each batch, as Kafka does.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        payload = payload.with_log_append_time(now_ms);
    }
    Ok(Staged {
        log,
        leadership,
        payload,
        partition: partition as u32,
    })
}

/// Appends staged batches: offsets assigned now, durability awaited later.
async fn append_staged(acks: i16, staged: Staged) -> Pending {
    let Staged {
        log,
        leadership,
        payload,
        partition,
    } = staged;
    match log.append(&payload, leadership.epoch).await {
        Ok(appended) => Pending::Appended {
            base: appended.base_offset,
            log_start: log.log_start_offset(),
            // acks=1: this replica's copy; acks=all: every in-sync replica's.
            durable: appended.durable.waiting_for(if acks == 1 {
                Wait::Local
            } else {
                Wait::Committed
            }),
            partition,
            replicated: leadership.replicas > 1 && acks == -1,
            records: payload.record_count(),
            bytes: payload.total_bytes() as u64,
        },
        Err(e) => Pending::Failed(e.kafka_error(), Some(e.to_string())),
    }
}

/// Transactions V2: the staged partitions a producer's first transactional batch of a
/// transaction is about to reach (no transaction of its open there at its epoch) are
/// added to the transaction at its coordinator before any is appended, as Kafka's
/// leaders do for Produce v12 — in one call per producer and epoch, so a request that
/// opens a transaction on eight partitions waits for one durable coordinator change,
/// not eight in turn. Each refusal is the error Kafka's produce answers with:
/// retriable while the coordinator is unreachable or still ending the previous
/// transaction. The partitions refused are returned with it, by staging index.
async fn enrol(
    ctx: &ShardContext,
    id: &str,
    staged: &[(String, i32, Result<Staged, Pending>)],
) -> Vec<(usize, ResponseError, String)> {
    // Per producer and epoch: the staging indexes it opens on, and their partitions.
    type Opened = (Vec<usize>, Vec<(String, u32)>);
    let mut openers: Vec<((i64, i16), Opened)> = Vec::new();
    for (i, (topic, _, s)) in staged.iter().enumerate() {
        let Ok(s) = s else { continue };
        let Some(batch) = s.payload.batches().next().filter(|b| b.is_transactional()) else {
            continue;
        };
        let producer = (batch.producer_id(), batch.producer_epoch());
        if s.log.in_transaction(producer.0, producer.1) {
            continue;
        }
        let k = match openers.iter().position(|(p, _)| *p == producer) {
            Some(k) => k,
            None => {
                openers.push((producer, Opened::default()));
                openers.len() - 1
            }
        };
        let (at, partitions) = &mut openers[k].1;
        at.push(i);
        partitions.push((topic.clone(), s.partition));
    }
    let mut refused = Vec::new();
    for ((producer_id, epoch), (at, partitions)) in openers {
        let Err(e) = ctx
            .enrol_in_txn(
                id,
                crate::ids::ProducerIdentity::new(producer_id, epoch),
                &partitions,
                &[],
            )
            .await
        else {
            continue;
        };
        let answer = match e {
            ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::NotCoordinator
            | ResponseError::ConcurrentTransactions => ResponseError::NotEnoughReplicas,
            ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch => {
                ResponseError::InvalidProducerEpoch
            }
            ResponseError::InvalidProducerIdMapping
            | ResponseError::TransactionalIdAuthorizationFailed => e,
            _ => ResponseError::InvalidTxnState,
        };
        for (i, (topic, p)) in at.into_iter().zip(partitions) {
            let why = format!("adding {topic}-{p} to transaction {id}: {e:?}");
            refused.push((i, answer, why));
        }
    }
    refused
}

/// Why `payload` is refused for what its batches claim to be, if it is: a client never
/// sends a control batch (markers are the coordinator's), and transactional batches
/// come only with a transactional id, idempotent (Kafka's rules).
fn misplaced(payload: &ProducePayload, transactional: bool) -> Option<String> {
    payload.batches().find_map(|batch| {
        if batch.is_control() {
            Some("a client cannot write a control batch".into())
        } else if batch.is_transactional() && (!transactional || batch.producer_id() < 0) {
            Some("a transactional batch needs a transactional id and a producer id".into())
        } else {
            None
        }
    })
}

/// Why a compacted topic refuses `payload`, if it does: a record without a key (Kafka's
/// INVALID_RECORD), or records that cannot be read to tell.
fn keyless(payload: &ProducePayload) -> Option<String> {
    payload
        .batches()
        .find_map(|batch| match batch_records::records(&batch) {
            Ok(r) if r.spans.iter().all(|s| s.key.is_some()) => None,
            Ok(_) => Some("a compacted topic cannot take a record without a key".into()),
            Err(e) => Some(format!("records cannot be read: {e}")),
        })
}

/// True while this shard leads the partition with at least `min.insync.replicas` in
/// sync.
fn in_sync_enough(ctx: &ShardContext, topic: &str, partition: u32) -> bool {
    ctx.leadership(topic, partition)
        .is_some_and(|l| l.isr >= l.min_insync)
}

/// A produce request whose batches are appended (in memory, offsets assigned) and that
/// waits to be acknowledged.
struct Appended {
    acks: i16,
    pending: Vec<(String, i32, Pending)>,
}

/// Appends every partition's batches: each is checked first, then (transactions V2)
/// the partitions a transaction opens on are enrolled, then all are appended in
/// request order.
async fn append(
    ctx: &ShardContext,
    access: &Access,
    version: i16,
    req: &ProduceRequest,
) -> Appended {
    let acks_valid = (-1..=1).contains(&req.acks);
    let how = AppendAs {
        acks: req.acks,
        transactional: req.transactional_id.is_some(),
    };
    // A transactional produce needs WRITE on its transactional id.
    let txn_writable = req
        .transactional_id
        .as_ref()
        .is_none_or(|id| access.transactional_id(Operation::Write, id.0.as_str()));
    let mut staged = Vec::new();
    for topic in &req.topic_data {
        let name = topic.name.0.as_str();
        let writable = access.topic(Operation::Write, name);
        for partition in &topic.partition_data {
            let s = if !acks_valid {
                Err(Pending::Failed(ResponseError::InvalidRequiredAcks, None))
            } else if !writable {
                Err(Pending::Failed(
                    ResponseError::TopicAuthorizationFailed,
                    None,
                ))
            } else if !txn_writable {
                Err(Pending::Failed(
                    ResponseError::TransactionalIdAuthorizationFailed,
                    None,
                ))
            } else {
                stage_one(ctx, how, name, partition.index, partition.records.as_ref()).await
            };
            staged.push((name.to_string(), partition.index, s));
        }
    }
    // Produce v12+ speaks transactions V2: this leader enrols the partitions itself.
    if let Some(id) = req.transactional_id.as_ref().filter(|_| version >= 12) {
        for (i, e, why) in enrol(ctx, id.0.as_str(), &staged).await {
            staged[i].2 = Err(Pending::Failed(e, Some(why)));
        }
    }
    let mut pending = Vec::with_capacity(staged.len());
    for (topic, index, s) in staged {
        let p = match s {
            Ok(s) => append_staged(req.acks, s).await,
            Err(failed) => failed,
        };
        pending.push((topic, index, p));
    }
    Appended {
        acks: req.acks,
        pending,
    }
}

/// An acks=0 produce, answered with nothing. No response carries the errors, so they
/// are counted here; a failure closes the connection (Kafka's way of telling an acks=0
/// producer).
fn unanswered(ctx: &ShardContext, pending: &[(String, i32, Pending)]) -> Reply<ProduceResponse> {
    let mut failed = false;
    for (topic, _, p) in pending {
        match p {
            Pending::Appended { records, bytes, .. } => {
                ctx.metrics.partitions.produced(topic, *records, *bytes)
            }
            Pending::Failed(e, _) => {
                ctx.metrics.requests.error("Produce", e.code());
                failed = true;
            }
        }
    }
    if failed {
        Reply::Close
    } else {
        Reply::Silent
    }
}

/// Waits until every appended partition is durable (acks 1 or -1) and answers.
/// Records stored are counted here; errors are counted from the response, like every
/// API's.
async fn acknowledge(
    ctx: Rc<ShardContext>,
    version: i16,
    appended: Appended,
) -> Reply<ProduceResponse> {
    let pending = appended.pending;
    let metrics = &ctx.metrics;
    let ctx = &ctx;
    let results = join_all(pending.into_iter().map(|(topic, index, p)| async move {
        let outcome = match p {
            Pending::Failed(error, text) => Err((error, text)),
            Pending::Appended {
                base,
                log_start,
                durable,
                partition,
                replicated,
                records,
                bytes,
            } => match durable.await {
                // Committed, but the ISR shrank below the minimum meanwhile (Kafka's
                // NOT_ENOUGH_REPLICAS_AFTER_APPEND: the client may retry; an
                // idempotent producer's retry is recognised).
                Ok(()) if replicated && !in_sync_enough(ctx, &topic, partition) => {
                    Err((ResponseError::NotEnoughReplicasAfterAppend, None))
                }
                Ok(()) => {
                    metrics.partitions.produced(&topic, records, bytes);
                    Ok((base, log_start))
                }
                Err(e) => Err((e.kafka_error(), Some(e.to_string()))),
            },
        };
        (topic, partition_answer(version, index, outcome))
    }))
    .await;
    let mut response = ProduceResponse::default();
    for (topic, r) in results {
        match response.responses.last_mut() {
            Some(t) if t.name.0.as_str() == topic => t.partition_responses.push(r),
            _ => {
                let mut t = TopicProduceResponse::default();
                t.name = super::topic_name(&topic);
                t.partition_responses.push(r);
                response.responses.push(t);
            }
        }
    }
    Reply::Respond(response)
}

/// Partition `index`'s answer at `version`: its base offset and log start once stored,
/// or the error and its message. Fields a version lacks keep their defaults (the
/// message is v8+, the log start v5+), or encoding fails.
fn partition_answer(
    version: i16,
    index: i32,
    outcome: Result<(Offset, Offset), (ResponseError, Option<String>)>,
) -> PartitionProduceResponse {
    let mut r = PartitionProduceResponse::default();
    r.index = index;
    r.log_append_time_ms = -1;
    match outcome {
        Ok((base, log_start)) => {
            r.base_offset = base.to_wire();
            r.log_start_offset = if version >= 5 {
                log_start.to_wire()
            } else {
                -1
            };
        }
        Err((error, message)) => {
            r.error_code = error.code();
            r.error_message = message.filter(|_| version >= 8).map(StrBytes::from_string);
            r.base_offset = -1;
            r.log_start_offset = -1;
        }
    }
    r
}

/// Produce in two phases. The appends run in request order, before the connection
/// reads its next request: two produce requests on one connection must reach each
/// partition in the order they were sent (Kafka's per-connection ordering), and
/// concurrent tasks racing for a partition's append lock would not guarantee that. Only
/// the wait for the group commit overlaps with later requests.
pub struct Produce;

impl Handler for Produce {
    type Request = ProduceRequest;
    type Response = ProduceResponse;

    fn errors(response: &ProduceResponse, error: &mut dyn FnMut(i16)) {
        for t in &response.responses {
            t.partition_responses
                .iter()
                .for_each(|p| error(p.error_code));
        }
    }

    async fn start(
        ctx: Rc<ShardContext>,
        call: Call,
        request: ProduceRequest,
    ) -> Phase<ProduceResponse, impl Future<Output = Reply<ProduceResponse>> + 'static> {
        let access = Access::of(&ctx, &call).await;
        let appended = append(&ctx, &access, call.version(), &request).await;
        if appended.acks == 0 {
            return Phase::Done(unanswered(&ctx, &appended.pending));
        }
        Phase::Rest(acknowledge(ctx, call.version(), appended))
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        request: ProduceRequest,
    ) -> Reply<ProduceResponse> {
        Self::start(ctx, call, request).await.finish().await
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::protocol::{Decodable, Encodable};

    use super::*;
    use crate::api::Route;

    /// `answer` in a response encoded at `version` and read back.
    fn at(version: i16, answer: PartitionProduceResponse) -> PartitionProduceResponse {
        let mut t = TopicProduceResponse::default();
        t.partition_responses.push(answer);
        let mut response = ProduceResponse::default();
        response.responses.push(t);
        let mut buf = bytes::BytesMut::new();
        response
            .encode(&mut buf, version)
            .unwrap_or_else(|e| panic!("v{version} encodes: {e}"));
        let mut back = ProduceResponse::decode(&mut buf.freeze(), version).expect("decodes");
        back.responses.remove(0).partition_responses.remove(0)
    }

    #[test]
    fn every_served_version_encodes_a_stored_and_a_failed_partition() {
        let route = Route::of(kafka_protocol::messages::ApiKey::Produce).expect("served");
        for version in route.version_min..=route.version_max {
            let stored = at(
                version,
                partition_answer(version, 3, Ok((Offset(42), Offset(7)))),
            );
            assert_eq!((stored.index, stored.error_code), (3, 0));
            assert_eq!(stored.base_offset, 42);
            let start = if version >= 5 { 7 } else { -1 };
            assert_eq!(stored.log_start_offset, start, "v{version}");

            let refusal = (
                ResponseError::NotEnoughReplicas,
                Some("1 in sync".to_string()),
            );
            let failed = at(version, partition_answer(version, 3, Err(refusal)));
            assert_eq!(failed.error_code, ResponseError::NotEnoughReplicas.code());
            assert_eq!((failed.base_offset, failed.log_start_offset), (-1, -1));
            let message = failed.error_message.as_ref().map(|m| m.as_str());
            let expected = if version >= 8 {
                Some("1 in sync")
            } else {
                None
            };
            assert_eq!(message, expected, "v{version}");
        }
    }
}
