//! One consumer stream: a connection to one partition leader and the partitions read
//! there, split into groups that each have one fetch in flight, so a connection carries
//! up to `max_in_flight` fetches at once (a partition's next fetch needs the previous
//! one's end offset, so pipelining is across partitions, never within one).

use std::{cell::RefCell, rc::Rc, sync::Arc, time::Duration};

use glommio::channels::local_channel;
use kafka_protocol::{
    error::ParseResponseErrorCode,
    messages::{
        fetch_request::{FetchPartition, FetchTopic},
        fetch_response::AbortedTransaction,
        BrokerId, FetchRequest, TopicName,
    },
};

use weir_client::{
    connection,
    dialer::Dialer,
    record_batch::{walk_batches, BatchSummary},
    ClientError,
};

use crate::{
    clock::now_ns,
    control::Control,
    group::Positions,
    payload::read_payload,
    stats::{CoreStats, Metric},
};

/// The Fetch version loadgen speaks (Kafka 2.3+).
pub const FETCH_VERSION: i16 = 11;
/// How long consumers keep reading after the producers finished, to catch up.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);
/// A `consume --messages N` stream stops after this long without a message (the topic
/// may hold fewer than N), as Kafka's consumer perf tool does.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// What every consumer stream of the run shares.
#[derive(Clone)]
pub struct ConsumerConfig {
    /// The topic.
    pub topic: TopicName,
    /// Bytes asked for per partition.
    pub partition_bytes_max: i32,
    /// How long the broker may hold a fetch.
    pub wait_ms_max: i32,
    /// Fetches in flight per connection.
    pub max_in_flight: usize,
    /// Whether values are read for end-to-end latency (e2e) or only counted.
    pub end_to_end: bool,
    /// Stop after this many messages over all consumers.
    pub messages: Option<u64>,
    /// Where to record the positions reached, for a `--group` member's commits.
    pub positions: Option<Arc<Positions>>,
    /// How connections are opened (plain or TLS).
    pub dialer: Dialer,
    /// Read only committed records (isolation level READ_COMMITTED), dropping the
    /// records of the aborted transactions each answer names.
    pub read_committed: bool,
}

/// One stream's assignment: partitions on one leader with their start offsets.
#[derive(Debug, Clone)]
pub struct FetchStream {
    /// The leader's address.
    pub leader: String,
    /// Partition and the offset to start at.
    pub partitions: Vec<(i32, i64)>,
}

/// Reads until the run ends, recording fetch (and, in e2e, end-to-end) latency.
pub async fn run(
    stream: FetchStream,
    config: Rc<ConsumerConfig>,
    control: Arc<Control>,
    stats: Rc<RefCell<CoreStats>>,
) {
    if let Err(reason) = consume(stream, &config, &control, &stats).await {
        control.abort(reason);
    }
}

async fn consume(
    stream: FetchStream,
    config: &Rc<ConsumerConfig>,
    control: &Arc<Control>,
    stats: &Rc<RefCell<CoreStats>>,
) -> Result<(), String> {
    let (mut writer, mut reader) =
        connection::connect_with(&config.dialer, &stream.leader, "loadgen")
            .await
            .map_err(|e| format!("consumer of {}: {e}", stream.leader))?;
    let group_count = config
        .max_in_flight
        .clamp(1, stream.partitions.len().max(1));
    let mut groups: Vec<Vec<(i32, i64)>> = vec![Vec::new(); group_count];
    for (i, partition) in stream.partitions.iter().enumerate() {
        groups[i % group_count].push(*partition);
    }
    let groups = Rc::new(RefCell::new(groups));
    let (ready_tx, ready_rx) = local_channel::new_unbounded::<usize>();
    for group in 0..group_count {
        let _ = ready_tx.try_send(group);
    }
    let (sent_tx, sent_rx) = local_channel::new_unbounded::<(i32, usize, u64)>();
    let sender = {
        let groups = groups.clone();
        let config = config.clone();
        glommio::spawn_local(async move {
            while let Some(group) = ready_rx.recv().await {
                let request = fetch_request(&config, &groups.borrow()[group]);
                let sent_ns = now_ns();
                let correlation_id = writer.send(&request, FETCH_VERSION).await?;
                let _ = sent_tx.try_send((correlation_id, group, sent_ns));
            }
            Ok::<(), ClientError>(())
        })
    };
    let mut outcome = Ok(());
    let mut last_message_ns = now_ns();
    while let Some((correlation_id, group, sent_ns)) = sent_rx.recv().await {
        let response = match reader
            .receive::<FetchRequest>(correlation_id, FETCH_VERSION)
            .await
        {
            Ok(response) => response,
            Err(e) => {
                outcome = Err(format!("consumer of {}: {e}", stream.leader));
                break;
            }
        };
        let received_ns = now_ns();
        let mut failed = false;
        let mut messages = 0u64;
        {
            let mut stats = stats.borrow_mut();
            stats.record(Metric::Fetch, received_ns.saturating_sub(sent_ns));
            let mut groups = groups.borrow_mut();
            for partition in response.responses.iter().flat_map(|t| &t.partitions) {
                let Some(entry) = groups[group]
                    .iter_mut()
                    .find(|(p, _)| *p == partition.partition_index)
                else {
                    continue;
                };
                if let Some(error) = partition.error_code.err() {
                    stats.counters.errors += 1;
                    control.note_error(&format!("fetch {error:?}"), 1);
                    failed = true;
                    continue;
                }
                let Some(records) = &partition.records else {
                    continue;
                };
                let mut bytes = 0u64;
                let mut aborted = Aborted::of(partition.aborted_transactions.as_deref());
                let walked = walk_batches(
                    records,
                    config.end_to_end,
                    |batch| {
                        entry.1 = batch.next_offset;
                        bytes += batch.bytes as u64;
                        let kept = aborted.keeps(batch);
                        if kept {
                            messages += u64::from(batch.records);
                        }
                        kept
                    },
                    |value| {
                        if let Some((send_ns, _)) = read_payload(value) {
                            if send_ns <= received_ns {
                                stats.record(Metric::EndToEnd, received_ns - send_ns);
                            }
                        }
                    },
                );
                if let Err(e) = walked {
                    stats.counters.errors += 1;
                    control.note_error(&format!("fetch: {e}"), 1);
                    failed = true;
                }
                if let Some(positions) = &config.positions {
                    positions.advance(entry.0, entry.1);
                }
                stats.counters.consumed_bytes += bytes;
            }
            stats.counters.consumed_messages += messages;
        }
        let consumed = control.add_consumed(messages);
        if messages > 0 {
            last_message_ns = received_ns;
        }
        if finished(config, control, consumed, last_message_ns) {
            break;
        }
        if failed {
            glommio::timer::sleep(Duration::from_millis(100)).await;
        }
        let _ = ready_tx.try_send(group);
    }
    drop(ready_tx);
    sender.cancel().await;
    outcome
}

/// Whether consuming is over: the message count is reached (or nothing arrived for the
/// idle timeout), the run was aborted, or (with producers) every acknowledged message has
/// arrived or the catch-up time is over.
fn finished(
    config: &ConsumerConfig,
    control: &Control,
    consumed: u64,
    last_message_ns: u64,
) -> bool {
    let now = now_ns();
    if control.aborted() || config.messages.is_some_and(|n| consumed >= n) {
        return true;
    }
    if !config.end_to_end {
        let idle = now.saturating_sub(last_message_ns) > IDLE_TIMEOUT.as_nanos() as u64;
        return control.stopping(now) || (config.messages.is_some() && idle);
    }
    match control.producers_done_at() {
        Some(done_ns) => {
            consumed >= control.acknowledged()
                || now.saturating_sub(done_ns) > CATCH_UP_TIMEOUT.as_nanos() as u64
        }
        None => false,
    }
}

/// The aborted transactions of one partition's answer, walked as Kafka's consumer walks
/// them: a producer's data batches are dropped from its aborted transaction's first
/// offset until its ABORT marker.
struct Aborted {
    /// (first offset, producer), the latest first.
    pending: Vec<(i64, i64)>,
    /// Producers whose aborted transaction the walk is inside.
    inside: Vec<i64>,
}

impl Aborted {
    fn of(list: Option<&[AbortedTransaction]>) -> Aborted {
        let mut pending: Vec<(i64, i64)> = list
            .unwrap_or_default()
            .iter()
            .map(|a| (a.first_offset, a.producer_id.0))
            .collect();
        pending.sort_unstable_by(|a, b| b.cmp(a));
        Aborted {
            pending,
            inside: Vec::new(),
        }
    }

    /// Whether `batch`'s records are delivered: not a control batch, not aborted.
    fn keeps(&mut self, batch: &BatchSummary) -> bool {
        while self
            .pending
            .last()
            .is_some_and(|(first, _)| *first < batch.next_offset)
        {
            if let Some((_, producer)) = self.pending.pop() {
                self.inside.push(producer);
            }
        }
        if batch.control {
            if batch.marker == Some(false) {
                self.inside.retain(|p| *p != batch.producer_id);
            }
            return false;
        }
        !self.inside.contains(&batch.producer_id)
    }
}

fn fetch_request(config: &ConsumerConfig, partitions: &[(i32, i64)]) -> FetchRequest {
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.isolation_level = i8::from(config.read_committed);
    request.max_wait_ms = config.wait_ms_max;
    request.min_bytes = 1;
    request.max_bytes = i32::MAX;
    request.session_epoch = -1;
    request.topics = vec![FetchTopic::default()
        .with_topic(config.topic.clone())
        .with_partitions(
            partitions
                .iter()
                .map(|&(partition, offset)| {
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_current_leader_epoch(-1)
                        .with_fetch_offset(offset)
                        .with_log_start_offset(-1)
                        .with_partition_max_bytes(config.partition_bytes_max)
                })
                .collect(),
        )];
    request
}
