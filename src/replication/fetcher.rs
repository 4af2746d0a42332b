//! A follower shard's replica fetcher for one leader node (Kafka's replica fetcher per
//! source broker, here per shard): a Kafka client of the leader shard's own port that
//! asks for every partition of its [`FetchSession`] in one long-polling Fetch (v12, with
//! its replica id), appends what each gets with the leader's offsets and epochs through
//! the shard's own group commit — one flush round for all of them — and asks again only
//! once that is durable, so every offset it reports is durable here. A divergent tail
//! (the leader's diverging-epoch answer) is cut, and a log the leader's log start passed
//! starts again there. A partition's own failure makes it sit out a moment; the others
//! go on.

use std::{
    rc::Rc,
    time::{Duration, Instant},
};

use kafka_protocol::{
    messages::{
        fetch_request::{FetchPartition, FetchTopic},
        fetch_response::PartitionData,
        BrokerId, FetchRequest, FetchResponse,
    },
    ResponseError,
};
use weir_client::{
    connection::{call, connect_with, RequestWriter, ResponseReader},
    dialer::Dialer,
    names::topic_name,
    ClientError,
};

use super::{
    follower_rules::{next_step, NextStep},
    sessions::FetchSession,
    PartitionKey,
};
use crate::{
    metadata::partition_error::PartitionError,
    metadata::placement::NodeId,
    storage::{
        partition_log::{Appended, Truncation, Wait},
        BatchError, Offset, PartitionLog, ProducePayload, StorageError,
    },
};

/// The Fetch version followers speak: the first with diverging epochs.
const FETCH_VERSION: i16 = 12;
/// How long the leader may hold a fetch that finds nothing new.
const MAX_WAIT_MS: i32 = 500;
/// An answer later than this means the leader is gone (or stopped); reconnect.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause before trying again after a failure.
const RETRY: Duration = Duration::from_millis(200);
/// The most record bytes one fetch asks for, over all its partitions.
const FETCH_BYTES_MAX: i32 = 16 << 20;
/// The most record bytes one fetch asks for of one partition.
const PARTITION_BYTES_MAX: i32 = 4 << 20;

/// Why a round of replication stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// The connection to the leader failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The leader did not answer in time.
    #[error("the leader did not answer within {0:?}")]
    Timeout(Duration),
    /// This replica's log failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The leader sent batches that do not check out.
    #[error("bad batches from the leader: {0}")]
    Batch(#[from] BatchError),
    /// This shard no longer holds the partition's log.
    #[error("partition not available here: {0:?}")]
    Partition(PartitionError),
    /// The leader refused the fetch.
    #[error("the leader answered {0:?}")]
    Refused(ResponseError),
}

/// A partition asked for in one fetch.
struct Asked {
    key: PartitionKey,
    epoch: i32,
    log: PartitionLog,
}

/// Batches appended from one answer, waiting to be durable.
struct Appending {
    appended: Appended,
    answer: PartitionData,
}

/// Fetches `session`'s partitions from its leader into `host`'s replica logs until the
/// session is stopped.
pub async fn run(host: Rc<impl ReplicaLogs + LeaderAddresses>, session: Rc<FetchSession>) {
    let leader = session.leader;
    tracing::info!(leader, "fetching from a leader");
    let mut failures = 0u32;
    let dialer = host.dialer();
    while !session.stopped() {
        let Some(addr) = host.leader_addr(leader) else {
            glommio::timer::sleep(RETRY).await;
            continue;
        };
        let result = match connect_with(&dialer, &addr, "weir-replica").await {
            Ok((writer, reader)) => {
                let mut leader = Connection { writer, reader };
                replicate(&*host, &session, &mut leader).await
            }
            Err(e) => Err(e.into()),
        };
        if let Err(e) = result {
            failures += 1;
            // The first failure and every 50th after it: a dead leader is not a flood.
            if failures % 50 == 1 {
                tracing::warn!(leader, error = %e, "replica fetch failed; retrying");
            }
            glommio::timer::sleep(RETRY).await;
        }
    }
    tracing::debug!(leader, "stopped fetching from a leader");
}

/// The leader a follower fetches from, as the fetcher needs it (a mock in tests).
#[allow(async_fn_in_trait)] // used on the shard only, never sent between threads
pub trait Leader {
    /// Sends one Fetch and waits for its answer.
    async fn fetch(&mut self, request: &FetchRequest) -> Result<FetchResponse, ReplicaError>;
}

/// The replica logs a follower keeps, as the fetcher needs them.
#[allow(async_fn_in_trait)]
pub trait ReplicaLogs {
    /// This follower's node id, sent with each fetch.
    fn node(&self) -> NodeId;
    /// The log of partition `p` of `topic`, opened on first use.
    async fn replica(&self, topic: &str, p: u32) -> Result<PartitionLog, PartitionError>;
    /// Truncates that log as `how` says and opens it again.
    async fn cut(
        &self,
        topic: &str,
        p: u32,
        how: Truncation,
    ) -> Result<PartitionLog, PartitionError>;
}

/// Where a follower finds its leaders and how it dials them.
pub trait LeaderAddresses {
    /// The `host:port` of node `node`'s Kafka listener, when the metadata knows it.
    fn leader_addr(&self, node: NodeId) -> Option<String>;
    /// How to open a connection to another host's shard (its TLS and SASL login).
    fn dialer(&self) -> Dialer;
}

/// A connection to the leader shard's own port.
struct Connection {
    writer: RequestWriter,
    reader: ResponseReader,
}

impl Leader for Connection {
    async fn fetch(&mut self, request: &FetchRequest) -> Result<FetchResponse, ReplicaError> {
        let (writer, reader) = (&mut self.writer, &mut self.reader);
        futures_lite::future::or(
            async { Some(call::<FetchRequest>(writer, reader, request, FETCH_VERSION).await) },
            async {
                glommio::timer::sleep(ANSWER_TIMEOUT).await;
                None
            },
        )
        .await
        .ok_or(ReplicaError::Timeout(ANSWER_TIMEOUT))?
        .map_err(ReplicaError::from)
    }
}

/// Fetches `session`'s partitions from `leader` into `logs` until the session stops or
/// the leader fails.
pub async fn replicate(
    logs: &impl ReplicaLogs,
    session: &FetchSession,
    leader: &mut impl Leader,
) -> Result<(), ReplicaError> {
    while !session.stopped() {
        let mut asked = Vec::new();
        for (key, epoch) in session.due(Instant::now()) {
            match logs.replica(&key.0, key.1).await {
                Ok(log) => asked.push(Asked { key, epoch, log }),
                Err(e) => sit_out(session, &key, &ReplicaError::Partition(e)),
            }
        }
        if asked.is_empty() {
            glommio::timer::sleep(RETRY).await;
            continue;
        }
        let request = fetch_request(logs.node(), &asked);
        let answer = leader.fetch(&request).await?;
        // Every partition's batches go into the group commit first, then all are
        // waited for together: one flush round, not one per partition. `asked` is in
        // key order, so each answer finds its partition without a key being built.
        let mut answered = vec![false; asked.len()];
        let mut appending = Vec::new();
        for t in answer.responses {
            for part in t.partitions {
                let wanted = (t.topic.0.as_str(), part.partition_index as u32);
                let Ok(i) = asked.binary_search_by(|a| (a.key.0.as_str(), a.key.1).cmp(&wanted))
                else {
                    continue;
                };
                let a = &asked[i];
                if std::mem::replace(&mut answered[i], true) || !session.current(&a.key, a.epoch) {
                    continue;
                }
                match take(logs, a, part).await {
                    Ok(Some(x)) => appending.push((i, x)),
                    Ok(None) => {}
                    Err(e) => sit_out(session, &a.key, &e),
                }
            }
        }
        for (i, x) in appending {
            if let Err(e) = settle(&asked[i], x).await {
                sit_out(session, &asked[i].key, &e);
            }
        }
    }
    Ok(())
}

/// `key` failed by itself: logged (its first failure and every 50th), and it sits out
/// the fetches for a moment while the others go on.
fn sit_out(session: &FetchSession, key: &PartitionKey, e: &ReplicaError) {
    let failures = session.sit_out(key, Instant::now() + RETRY);
    if failures % 50 == 1 {
        tracing::warn!(topic = %key.0, partition = key.1, leader = session.leader, error = %e, "replica fetch failed; retrying");
    }
}

/// Takes one partition's answer: cuts or restarts its log as [`next_step`] says, or
/// appends its batches (to be waited for by [`settle`]); an answer without batches
/// is settled at once.
async fn take(
    logs: &impl ReplicaLogs,
    a: &Asked,
    mut part: PartitionData,
) -> Result<Option<Appending>, ReplicaError> {
    let (key, log) = (&a.key, &a.log);
    match next_step(&part, log) {
        NextStep::Append => {}
        NextStep::Refused(e) => return Err(ReplicaError::Refused(e)),
        NextStep::RestartAt(start) => {
            tracing::warn!(topic = %key.0, partition = key.1, start = start.0, log_end = log.log_end().0, "the leader's log starts past this replica's end: starting again there");
            logs.cut(&key.0, key.1, Truncation::RestartAt(start))
                .await
                .map_err(ReplicaError::Partition)?;
            return Ok(None);
        }
        NextStep::CutTail(cut) => {
            tracing::warn!(topic = %key.0, partition = key.1, epoch = part.diverging_epoch.epoch, at = cut.0, log_end = log.log_end().0, "cutting a divergent tail");
            logs.cut(&key.0, key.1, Truncation::Tail(cut))
                .await
                .map_err(ReplicaError::Partition)?;
            return Ok(None);
        }
    }
    match part.records.take().filter(|r| !r.is_empty()) {
        Some(records) => {
            let payload = ProducePayload::validate_stored(records, usize::MAX)?;
            let appended = log.append_replica(&payload).await?;
            Ok(Some(Appending {
                appended,
                answer: part,
            }))
        }
        None => {
            follow_leader(log, &part).await?;
            Ok(None)
        }
    }
}

/// Waits until an answer's batches are durable here, then follows the leader's high
/// watermark and log start.
///
/// An offsets journal replica does not apply what it holds to its host's LMDB: a record
/// it holds may not be committed, and a divergent tail cut later would take the record
/// but not its effect. The replay when this shard takes up the partition's leadership
/// applies the log, which from then on is the partition's own.
async fn settle(a: &Asked, x: Appending) -> Result<(), ReplicaError> {
    x.appended.durable.waiting_for(Wait::Local).await?;
    follow_leader(&a.log, &x.answer).await
}

/// The leader's high watermark and log start, as far as this replica holds them:
/// records the leader deleted (DeleteRecords) go here too, so a new leader never serves
/// them again.
async fn follow_leader(log: &PartitionLog, part: &PartitionData) -> Result<(), ReplicaError> {
    log.follow_high_watermark(Offset(part.high_watermark.max(0) as u64));
    let start = Offset(part.log_start_offset.max(0) as u64).min(log.high_watermark());
    if start > log.log_start_offset() {
        log.delete_records(start).await?;
    }
    Ok(())
}

/// One Fetch for every partition of `asked`, from each one's log end (everything
/// below it is durable: each fetch waits for the previous one's appends).
fn fetch_request(me: NodeId, asked: &[Asked]) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for a in asked {
        let mut p = FetchPartition::default();
        p.partition = a.key.1 as i32;
        p.current_leader_epoch = a.epoch;
        p.fetch_offset = a.log.log_end().to_wire();
        p.last_fetched_epoch = a.log.leader_epochs().latest().unwrap_or(-1);
        p.log_start_offset = a.log.log_start_offset().to_wire();
        p.partition_max_bytes = PARTITION_BYTES_MAX;
        // `asked` is in key order: a topic's partitions are adjacent.
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == a.key.0 => t.partitions.push(p),
            _ => {
                let mut t = FetchTopic::default();
                t.topic = topic_name(&a.key.0);
                t.partitions = vec![p];
                topics.push(t);
            }
        }
    }
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(me);
    r.max_wait_ms = MAX_WAIT_MS;
    r.min_bytes = 1;
    r.max_bytes = FETCH_BYTES_MAX;
    r.topics = topics;
    r
}

#[cfg(test)]
#[path = "fetcher_tests.rs"]
mod tests;
