//! A follower shard's replica fetcher for one partition: a Kafka client of its leader
//! shard's own port (Fetch v12 with its replica id, long-polling), appending what it
//! gets with the leader's offsets and epochs through its own group commit, and asking
//! for more only once that is durable — so the offset it reports is durable here. A
//! divergent tail (the leader's diverging-epoch answer) is cut before going on.

use std::{cell::Cell, rc::Rc, time::Duration};

use kafka_protocol::{
    messages::{
        fetch_request::{FetchPartition, FetchTopic},
        BrokerId, FetchRequest, FetchResponse,
    },
    ResponseError,
};
use weir_client::{
    connection::{call, connect, RequestWriter, ResponseReader},
    ClientError,
};

use crate::{
    metadata::{
        cluster_state::OFFSETS_TOPIC,
        placement::{host_of, shard_of, NodeId},
    },
    shard::context::{PartitionError, ShardContext},
    storage::{
        partition_log::{Truncation, Wait},
        BatchError, Offset, ProducePayload, StorageError,
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
/// The most record bytes one fetch asks for.
const FETCH_BYTES_MAX: i32 = 8 << 20;

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
    /// The leader's answer was not about the partition asked for.
    #[error("the leader's answer lacks the partition")]
    Malformed,
    /// Offsets journal records could not be applied.
    #[error("offsets journal: {0}")]
    Journal(String),
}

/// What this follower replicates, and from whom.
#[derive(Debug, Clone)]
pub struct Assignment {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// The leader's node.
    pub leader: NodeId,
    /// The leader's epoch.
    pub epoch: i32,
}

/// Replicates `a` until `stop` is set (the metadata named another leader or epoch).
pub async fn follow(ctx: Rc<ShardContext>, a: Assignment, stop: Rc<Cell<bool>>) {
    tracing::info!(topic = %a.topic, partition = a.partition, leader = a.leader, epoch = a.epoch, "following");
    let mut failures = 0u32;
    while !stop.get() {
        let Some(addr) = leader_addr(&ctx, a.leader) else {
            glommio::timer::sleep(RETRY).await;
            continue;
        };
        let result = match connect(&addr, "weir-replica").await {
            Ok((mut writer, mut reader)) => {
                replicate(&ctx, &a, &stop, &mut writer, &mut reader).await
            }
            Err(e) => Err(e.into()),
        };
        if let Err(e) = result {
            failures += 1;
            // The first failure and every 50th after it: a dead leader is not a flood.
            if failures % 50 == 1 {
                tracing::warn!(topic = %a.topic, partition = a.partition, leader = a.leader, error = %e, "replica fetch failed; retrying");
            }
            glommio::timer::sleep(RETRY).await;
        }
    }
    tracing::debug!(topic = %a.topic, partition = a.partition, "stopped following");
}

/// `host:port` of the leader node's plaintext listener, from the metadata.
fn leader_addr(ctx: &ShardContext, leader: NodeId) -> Option<String> {
    let snapshot = ctx.metadata();
    let host = snapshot.view.hosts.get(&host_of(leader))?;
    let port = u32::from(host.port) + shard_of(leader).0 as u32;
    Some(format!("{}:{port}", host.advertise))
}

async fn replicate(
    ctx: &ShardContext,
    a: &Assignment,
    stop: &Cell<bool>,
    writer: &mut RequestWriter,
    reader: &mut ResponseReader,
) -> Result<(), ReplicaError> {
    while !stop.get() {
        let log = ctx
            .replica(&a.topic, a.partition)
            .await
            .map_err(ReplicaError::Partition)?;
        let request = fetch_request(ctx.node, a, &log);
        let answer = futures_lite::future::or(
            async { Some(call::<FetchRequest>(writer, reader, &request, FETCH_VERSION).await) },
            async {
                glommio::timer::sleep(ANSWER_TIMEOUT).await;
                None
            },
        )
        .await
        .ok_or(ReplicaError::Timeout(ANSWER_TIMEOUT))??;
        let part = partition_of(answer)?;
        match ResponseError::try_from_code(part.error_code) {
            None => {}
            Some(ResponseError::OffsetOutOfRange)
                if part.log_start_offset > log.log_end().to_wire() =>
            {
                // Retention or DeleteRecords took the leader's log past everything this
                // replica holds (a new replica, or one away for long): start again at
                // the leader's log start.
                let start = Offset(part.log_start_offset as u64);
                tracing::warn!(topic = %a.topic, partition = a.partition, start = start.0, log_end = log.log_end().0, "the leader's log starts past this replica's end: starting again there");
                ctx.cut_replica(&a.topic, a.partition, Truncation::RestartAt(start))
                    .await
                    .map_err(ReplicaError::Partition)?;
                continue;
            }
            Some(e) => return Err(ReplicaError::Refused(e)),
        }
        let diverging = &part.diverging_epoch;
        if diverging.epoch >= 0 || diverging.end_offset >= 0 {
            let leader_end = Offset(diverging.end_offset.max(0) as u64);
            let ours = log
                .epoch_end(diverging.epoch)
                .map_or(leader_end, |e| e.end_offset);
            let cut = leader_end.min(ours).min(log.log_end());
            tracing::warn!(topic = %a.topic, partition = a.partition, epoch = diverging.epoch, at = cut.0, log_end = log.log_end().0, "cutting a divergent tail");
            ctx.cut_replica(&a.topic, a.partition, Truncation::Tail(cut))
                .await
                .map_err(ReplicaError::Partition)?;
            continue;
        }
        if let Some(records) = part.records.filter(|r| !r.is_empty()) {
            let payload = ProducePayload::validate(records, usize::MAX)?;
            let appended = log.append_replica(&payload).await?;
            appended.durable.waiting_for(Wait::Local).await?;
            if a.topic == OFFSETS_TOPIC {
                // A journal replica applies the commits it now holds to its host's LMDB.
                ctx.coordinator
                    .apply_journal(&payload)
                    .await
                    .map_err(|e| ReplicaError::Journal(e.to_string()))?;
            }
        }
        log.set_commit_cap(Offset(part.high_watermark.max(0) as u64));
        // Records the leader deleted (DeleteRecords) go here too, as far as this replica
        // has them committed, so a new leader never serves them again.
        let start = Offset(part.log_start_offset.max(0) as u64).min(log.high_watermark());
        if start > log.log_start_offset() {
            log.delete_records(start).await?;
        }
    }
    Ok(())
}

fn fetch_request(me: NodeId, a: &Assignment, log: &crate::storage::PartitionLog) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = a.partition as i32;
    p.current_leader_epoch = a.epoch;
    // Everything below the log end is durable: each fetch waits for the last append.
    p.fetch_offset = log.log_end().to_wire();
    p.last_fetched_epoch = log.leader_epochs().latest().unwrap_or(-1);
    p.log_start_offset = log.log_start_offset().to_wire();
    p.partition_max_bytes = FETCH_BYTES_MAX;
    let mut t = FetchTopic::default();
    t.topic = crate::api::topic_name(&a.topic);
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(me);
    r.max_wait_ms = MAX_WAIT_MS;
    r.min_bytes = 1;
    r.max_bytes = FETCH_BYTES_MAX;
    r.topics = vec![t];
    r
}

fn partition_of(
    answer: FetchResponse,
) -> Result<kafka_protocol::messages::fetch_response::PartitionData, ReplicaError> {
    answer
        .responses
        .into_iter()
        .next()
        .and_then(|t| t.partitions.into_iter().next())
        .ok_or(ReplicaError::Malformed)
}
