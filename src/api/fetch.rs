//! Fetch: returns stored batches unchanged from each requested partition, up to the
//! high watermark, honouring `max_bytes`, `partition_max_bytes` and long polling
//! (`min_bytes`, `max_wait_ms`: the request waits for group commits until enough bytes
//! are readable or the wait is over). Fetch sessions are declined (session id 0), which
//! Kafka allows: clients then send full fetches.
//!
//! A `read_committed` fetch (isolation level 1) reads nothing at or past the partition's
//! last stable offset and is told which transactions in what it read were aborted.
//!
//! A fetch with a replica id is a follower's: it reads everything durable on the leader
//! (not only what is committed), reports the follower's durable end (its fetch offset)
//! to the leader's replication state, and is told to cut its log first when its last
//! fetched epoch does not end where the leader's log says (v12's diverging epoch).

use std::{
    rc::Rc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData},
        BrokerId, FetchRequest, FetchResponse, ProducerId,
    },
    ResponseError,
};

use crate::{
    metadata::partition_error::PartitionError,
    metadata::replication_throttle::LEADER_RATE,
    metrics::ShardMetrics,
    replication::{FetchCheck, Replication},
    security::acl::Operation,
    shard::context::ShardContext,
    storage::{partition_txns::AbortedTxn, Offset, StorageError},
};

use super::{authorize::Access, error_code::KafkaError, Call, Handler, Reply};

/// The longest a fetch may wait, whatever the client asks.
const WAIT_MAX: Duration = Duration::from_secs(30);

/// The most record bytes one fetch response carries, whatever the client asks (beyond
/// one whole batch, so a consumer always makes progress): Kafka's broker default
/// `fetch.max.bytes`, 55 MiB.
pub const RESPONSE_RECORD_BYTES_MAX: usize = 55 << 20;

async fn read_all(
    ctx: &ShardContext,
    access: &Access,
    req: &FetchRequest,
    version: i16,
) -> (Vec<FetchableTopicResponse>, usize, bool) {
    // Fields a version does not have must keep their defaults, or encoding fails.
    let with_log_start = version >= 5;
    let replica = req.replica_id.0 >= 0;
    // READ_COMMITTED (v4+): nothing at or past the LSO, and the aborted transactions.
    let read_committed = version >= 4 && req.isolation_level == 1 && !replica;
    let mut budget = (req.max_bytes.max(0) as usize).min(RESPONSE_RECORD_BYTES_MAX);
    // A follower's fetch may be throttled (a reassignment's new replicas): only when
    // this node has a rate is anything more looked up.
    let throttling = replica
        .then(|| ctx.metadata())
        .and_then(|s| Some((s.view.throttles.rate(ctx.node, LEADER_RATE)?, s)));
    let throttle_rate = |name: &str, p: i32| {
        let (rate, s) = throttling.as_ref()?;
        let topic = s.topics.get(name)?;
        let state = topic.states.get(usize::try_from(p).ok()?)?;
        Replication::throttled_rate(
            Some(*rate),
            &topic.configs,
            state,
            p,
            ctx.node,
            req.replica_id.0,
        )
    };
    let mut total = 0usize;
    let mut errors = false;
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in &req.topics {
        let mut t = FetchableTopicResponse::default();
        t.topic = topic.topic.clone();
        t.topic_id = topic.topic_id;
        // Consumers need READ on the topic; followers CLUSTER_ACTION on the cluster.
        let refused = if replica {
            (!access.cluster(Operation::ClusterAction))
                .then_some(ResponseError::ClusterAuthorizationFailed)
        } else {
            (!access.topic(Operation::Read, topic.topic.0.as_str()))
                .then_some(ResponseError::TopicAuthorizationFailed)
        };
        for partition in &topic.partitions {
            let mut d = PartitionData::default();
            d.partition_index = partition.partition;
            d.high_watermark = -1;
            d.last_stable_offset = -1;
            d.log_start_offset = -1;
            d.aborted_transactions = Some(Vec::new());
            let name = topic.topic.0.as_str();
            if let Some(refusal) = refused {
                d.error_code = refusal.code();
                errors = true;
                t.partitions.push(d);
                continue;
            }
            match ctx.partition(name, partition.partition).await {
                Err(e) => {
                    d.error_code = e.code();
                    if e == PartitionError::NotOwner && version >= 12 {
                        // Where the partition lives, so the client need not ask Metadata.
                        let state = u32::try_from(partition.partition)
                            .ok()
                            .and_then(|p| ctx.partition_state(name, p));
                        if let Some(state) = state {
                            d.current_leader.leader_id = BrokerId(state.leader.unwrap_or(-1));
                            d.current_leader.leader_epoch = state.leader_epoch;
                        }
                    }
                    errors = true;
                }
                Ok(log) => {
                    let p = partition.partition as u32;
                    let epoch = ctx.leadership(name, p).map_or(0, |l| l.epoch);
                    if partition.current_leader_epoch >= 0
                        && partition.current_leader_epoch != epoch
                    {
                        // The fetcher's leader is older (fenced) or newer (not known here yet).
                        d.error_code = if partition.current_leader_epoch < epoch {
                            ResponseError::FencedLeaderEpoch.code()
                        } else {
                            ResponseError::UnknownLeaderEpoch.code()
                        };
                        errors = true;
                        t.partitions.push(d);
                        continue;
                    }
                    let offset = Offset(partition.fetch_offset.max(0) as u64);
                    if replica {
                        let check = ctx.replication.replica_fetched(
                            &(name.to_string(), p),
                            &log,
                            req.replica_id.0,
                            offset,
                            partition.last_fetched_epoch,
                        );
                        if let FetchCheck::Diverging(end) = check {
                            tracing::info!(topic = %name, partition = partition.partition, replica = req.replica_id.0, offset = offset.0, last_epoch = partition.last_fetched_epoch, epoch = end.epoch, end = end.end_offset.0, log_end = log.log_end().0, "a replica's log diverged: telling it where to cut");
                            d.diverging_epoch.epoch = end.epoch;
                            d.diverging_epoch.end_offset = end.end_offset.to_wire();
                            d.high_watermark = log.high_watermark().to_wire();
                            errors = true;
                            t.partitions.push(d);
                            continue;
                        }
                    }
                    let max = (partition.partition_max_bytes.max(0) as usize).min(budget);
                    let throttled = throttle_rate(name, partition.partition);
                    let held_back = throttled.is_some_and(|rate| {
                        !ctx.replication
                            .leader_throttle()
                            .allows(rate, Instant::now())
                    });
                    let mut stable = None;
                    let result = if partition.fetch_offset < 0 {
                        Err(StorageError::OffsetOutOfRange {
                            requested: offset,
                            log_start: log.log_start_offset(),
                            high_watermark: log.high_watermark(),
                        })
                    } else if (max == 0 && total > 0) || held_back {
                        // Out of response budget, or of the throttle's: offsets only.
                        log.read(offset, 0).await.map(|mut r| {
                            r.records = Bytes::new();
                            r
                        })
                    } else if replica {
                        // A follower copies everything durable, committed or not.
                        log.read_replica(offset, max.max(1)).await
                    } else if read_committed {
                        log.read_committed(offset, max.max(1))
                            .await
                            .map(|(r, view)| {
                                stable = Some(view);
                                r
                            })
                    } else {
                        log.read(offset, max.max(1)).await
                    };
                    match result {
                        Ok(read) => {
                            d.high_watermark = read.high_watermark.to_wire();
                            // Never above the high watermark the answer carries.
                            d.last_stable_offset =
                                log.last_stable_offset().min(read.high_watermark).to_wire();
                            if let Some(view) = stable {
                                d.last_stable_offset = view.last_stable.to_wire();
                                d.aborted_transactions =
                                    Some(view.aborted.iter().map(aborted_entry).collect());
                            }
                            if with_log_start {
                                d.log_start_offset = read.log_start_offset.to_wire();
                            }
                            total += read.records.len();
                            budget = budget.saturating_sub(read.records.len());
                            if throttled.is_some() {
                                ctx.replication.leader_throttle().spend(read.records.len());
                            }
                            d.records = Some(read.records);
                        }
                        Err(
                            e @ StorageError::OffsetOutOfRange {
                                log_start,
                                high_watermark,
                                ..
                            },
                        ) => {
                            d.error_code = e.code();
                            d.high_watermark = high_watermark.to_wire();
                            d.last_stable_offset = high_watermark.to_wire();
                            if with_log_start {
                                d.log_start_offset = log_start.to_wire();
                            }
                            errors = true;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "fetch read failed");
                            d.error_code = e.code();
                            errors = true;
                        }
                    }
                }
            }
            t.partitions.push(d);
        }
        topics.push(t);
    }
    (topics, total, errors)
}

/// An aborted transaction as a fetch response names it.
fn aborted_entry(a: &AbortedTxn) -> AbortedTransaction {
    let mut t = AbortedTransaction::default();
    t.producer_id = ProducerId(a.producer_id);
    t.first_offset = a.first_offset.to_wire();
    t
}

/// The most record bytes the answer to `req` can carry, not counting the one batch a
/// partition may return beyond its limit: the least of the request's `max_bytes`, the sum
/// of its partitions' `partition_max_bytes`, and [`RESPONSE_RECORD_BYTES_MAX`].
fn record_bytes_max(req: &FetchRequest) -> usize {
    let partitions: usize = req
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.partition_max_bytes.max(0) as usize)
        .fold(0, usize::saturating_add);
    (req.max_bytes.max(0) as usize)
        .min(partitions)
        .min(RESPONSE_RECORD_BYTES_MAX)
}

/// Counts the bytes a fetch returned, per topic.
fn count(metrics: &ShardMetrics, topics: &[FetchableTopicResponse]) {
    for t in topics {
        let bytes: usize = t
            .partitions
            .iter()
            .filter_map(|p| p.records.as_ref())
            .map(Bytes::len)
            .sum();
        metrics.partitions.fetched(t.topic.0.as_str(), bytes as u64);
    }
}

/// Reads every partition; waits for more data while fewer than `min_bytes` are
/// available, no partition failed and `max_wait_ms` has not passed. Its answer's size
/// is claimed from the connection's budget first (see [`Handler::answer_bytes_max`]).
pub struct Fetch;

impl Handler for Fetch {
    type Request = FetchRequest;
    type Response = FetchResponse;

    fn errors(response: &FetchResponse, error: &mut dyn FnMut(i16)) {
        error(response.error_code);
        for t in &response.responses {
            t.partitions.iter().for_each(|p| error(p.error_code));
        }
    }

    fn answer_bytes_max(request: &FetchRequest) -> usize {
        record_bytes_max(request)
    }

    async fn answer(ctx: Rc<ShardContext>, call: Call, req: FetchRequest) -> Reply<FetchResponse> {
        let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(WAIT_MAX);
        let deadline = Instant::now() + wait;
        let min_bytes = req.min_bytes.max(0) as usize;
        let access = Access::of(&ctx, &call).await;
        loop {
            let mark = ctx.storage.durable_mark();
            let (topics, total, errors) = read_all(&ctx, &access, &req, call.version()).await;
            let now = Instant::now();
            if total >= min_bytes.max(1) || errors || now >= deadline {
                count(&ctx.metrics, &topics);
                let mut response = FetchResponse::default();
                response.responses = topics;
                response.session_id = 0;
                return Reply::Respond(response);
            }
            futures_lite::future::or(
                ctx.storage.durable_after(mark),
                glommio::timer::sleep(deadline - now),
            )
            .await;
        }
    }
}
