//! One producer stream: a connection to one partition leader, the partitions it writes
//! there, and its share of the target rate.
//!
//! The writer generates messages on the stream's schedule, appends them to a batch per
//! partition, and sends a Produce request (one batch per partition with a ready batch)
//! whenever a request slot is free; the reader takes the responses in order and records
//! each message's latency. With a target rate, message *i* is due at
//! `start + i / rate` and its latency counts from that moment even if loadgen could not
//! send it then (no coordinated omission); in open throttle a message is due when it is
//! generated, which happens whenever the unsent buffer has room.

use std::{cell::RefCell, collections::VecDeque, rc::Rc, sync::Arc, time::Duration};

use bytes::Bytes;
use glommio::{channels::local_channel, sync::Semaphore};
use kafka_protocol::{
    error::ParseResponseErrorCode,
    messages::{
        produce_request::{PartitionProduceData, TopicProduceData},
        ProduceRequest, TopicName,
    },
};

use crate::{
    clock::{instant_at, now_ns},
    control::Control,
    options::Acks,
    record_batch::{filler, BatchBuilder},
    stats::{CoreStats, Metric},
    wire::{self, ResponseReader},
};

/// The Produce version loadgen speaks (Kafka 2.1+).
pub const PRODUCE_VERSION: i16 = 7;
/// A request carries at most this many bytes of batches (Kafka's max.request.size).
const REQUEST_BYTES_MAX: usize = 1 << 20;
/// How long the end of a run waits for outstanding acknowledgements.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What every producer stream of the run shares.
pub struct ProducerConfig {
    /// The topic.
    pub topic: TopicName,
    /// The acknowledgement asked for.
    pub acks: Acks,
    /// Value bytes per message.
    pub message_bytes: usize,
    /// A batch is closed when it reaches this size.
    pub batch_bytes: usize,
    /// A batch is closed this long after its first message at the latest.
    pub linger_ns: u64,
    /// Requests in flight per connection.
    pub max_in_flight: u64,
    /// Unsent bytes a stream may hold before it stops generating.
    pub buffer_bytes: u64,
}

/// One stream's assignment.
#[derive(Debug, Clone)]
pub struct ProduceStream {
    /// Stream number, unique in the run; the high bits of every message's sequence.
    pub id: u64,
    /// The leader's address.
    pub leader: String,
    /// The partitions written, in turn, one message each.
    pub partitions: Vec<i32>,
    /// Messages per second (0 = open throttle).
    pub rate: f64,
    /// Messages to send, if the run is bounded by count.
    pub messages: Option<u64>,
}

struct ReadyBatch {
    slot: usize,
    records: Bytes,
    send_ns: Vec<u64>,
}

struct OpenBatch {
    builder: BatchBuilder,
    send_ns: Vec<u64>,
    opened_ns: u64,
}

/// A request on the wire, waiting for its response.
struct InFlight {
    correlation_id: i32,
    batches: Vec<(i32, Vec<u64>)>,
}

/// Runs the stream until its time or message count is up (or the run is aborted), then
/// waits for outstanding acknowledgements. Failures are counted in `stats` and `control`.
pub async fn run(
    stream: ProduceStream,
    config: Rc<ProducerConfig>,
    control: Arc<Control>,
    stats: Rc<RefCell<CoreStats>>,
) {
    if let Err(reason) = produce(&stream, &config, &control, &stats).await {
        control.abort(reason);
    }
    control.producer_done();
}

async fn produce(
    stream: &ProduceStream,
    config: &Rc<ProducerConfig>,
    control: &Arc<Control>,
    stats: &Rc<RefCell<CoreStats>>,
) -> Result<(), String> {
    let (mut writer, reader) = wire::connect(&stream.leader)
        .await
        .map_err(|e| format!("producer {}: {e}", stream.id))?;
    let slots = Rc::new(Semaphore::new(config.max_in_flight));
    let (in_flight_tx, in_flight_rx) = local_channel::new_unbounded::<InFlight>();
    let acknowledged = config.acks != Acks::None;
    let reader_task = acknowledged.then(|| {
        glommio::spawn_local(read_responses(
            reader,
            in_flight_rx,
            slots.clone(),
            stream.id,
            control.clone(),
            stats.clone(),
            config.message_bytes as u64,
        ))
        .detach()
    });

    let filler = filler(config.message_bytes);
    let period_ns = if stream.rate > 0.0 {
        1e9 / stream.rate
    } else {
        0.0
    };
    let due_ns = |i: u64| control.start_ns + (i as f64 * period_ns) as u64;
    let mut open: Vec<Option<OpenBatch>> = stream.partitions.iter().map(|_| None).collect();
    let mut ready: VecDeque<ReadyBatch> = VecDeque::new();
    let mut generated = 0u64;
    let mut buffered_bytes = 0u64;
    let record_bytes = config.message_bytes as u64 + 16;
    let wall_ms = wall_clock_ms();

    loop {
        let now = now_ns();
        let quota_left = stream.messages.is_none_or(|n| generated < n);
        let stopping = control.stopping(now) || !quota_left;
        if !stopping {
            while buffered_bytes < config.buffer_bytes
                && stream.messages.is_none_or(|n| generated < n)
            {
                let send_ns = if period_ns > 0.0 {
                    let due = due_ns(generated);
                    if due > now {
                        break;
                    }
                    due
                } else {
                    if ready.len() >= stream.partitions.len() {
                        break;
                    }
                    now
                };
                let slot = (generated % stream.partitions.len() as u64) as usize;
                let batch = open[slot].get_or_insert_with(|| OpenBatch {
                    builder: BatchBuilder::new(config.batch_bytes, wall_ms(send_ns)),
                    send_ns: Vec::with_capacity(config.batch_bytes / config.message_bytes + 1),
                    opened_ns: send_ns,
                });
                batch.builder.push_payload(
                    wall_ms(send_ns),
                    config.message_bytes,
                    send_ns,
                    stream.id << 40 | generated,
                    &filler,
                );
                batch.send_ns.push(send_ns);
                generated += 1;
                buffered_bytes += record_bytes;
                if batch.builder.bytes() >= config.batch_bytes {
                    close(&mut open[slot], slot, &mut ready);
                }
            }
        }
        let mut next_linger_ns = u64::MAX;
        for (slot, open_batch) in open.iter_mut().enumerate() {
            if let Some(batch) = open_batch {
                let deadline = batch.opened_ns.saturating_add(config.linger_ns);
                if stopping || deadline <= now {
                    close(open_batch, slot, &mut ready);
                } else {
                    next_linger_ns = next_linger_ns.min(deadline);
                }
            }
        }
        if ready.is_empty() {
            if stopping {
                break;
            }
            let mut wake_ns = next_linger_ns;
            if period_ns > 0.0 && buffered_bytes < config.buffer_bytes {
                wake_ns = wake_ns.min(due_ns(generated));
            }
            if let Some(end) = control.end_ns {
                wake_ns = wake_ns.min(end);
            }
            if wake_ns == u64::MAX {
                return Err(format!(
                    "producer {}: nothing to send and nothing due",
                    stream.id
                ));
            }
            let wait = instant_at(wake_ns).saturating_duration_since(instant_at(now_ns()));
            glommio::timer::sleep(wait.min(Duration::from_millis(100))).await;
            continue;
        }
        if slots.acquire(1).await.is_err() {
            return Ok(());
        }
        let (request, batches, bytes) = request_from(&mut ready, stream, config);
        buffered_bytes -= bytes;
        let correlation_id = writer
            .send(&request, PRODUCE_VERSION)
            .await
            .map_err(|e| format!("producer {}: {e}", stream.id))?;
        if acknowledged {
            let _ = in_flight_tx.try_send(InFlight {
                correlation_id,
                batches,
            });
        } else {
            let written_ns = now_ns();
            let mut stats = stats.borrow_mut();
            let mut messages = 0u64;
            for (_, send_ns) in &batches {
                for &sent in send_ns {
                    stats.record(Metric::Produce, written_ns.saturating_sub(sent));
                }
                messages += send_ns.len() as u64;
            }
            stats.counters.produced_messages += messages;
            stats.counters.produced_bytes += messages * config.message_bytes as u64;
            control.add_acknowledged(messages);
            slots.signal(1);
        }
    }
    drop(in_flight_tx);
    let drained = glommio::timer::timeout(DRAIN_TIMEOUT, async {
        slots
            .acquire(config.max_in_flight)
            .await
            .map_err(|e| std::io::Error::other(e.to_string()).into())
    })
    .await;
    if let Some(task) = reader_task {
        task.cancel();
    }
    match drained {
        Ok(()) => Ok(()),
        Err(_) if control.aborted() => Ok(()),
        Err(_) => Err(format!(
            "producer {}: acknowledgements still missing {} s after the end",
            stream.id,
            DRAIN_TIMEOUT.as_secs()
        )),
    }
}

fn close(slot_batch: &mut Option<OpenBatch>, slot: usize, ready: &mut VecDeque<ReadyBatch>) {
    if let Some(batch) = slot_batch.take() {
        ready.push_back(ReadyBatch {
            slot,
            records: batch.builder.finish(),
            send_ns: batch.send_ns,
        });
    }
}

/// Takes the oldest ready batch of each partition (up to the request size limit) into one
/// Produce request. Returns the request, its batches' send times and its message bytes.
fn request_from(
    ready: &mut VecDeque<ReadyBatch>,
    stream: &ProduceStream,
    config: &ProducerConfig,
) -> (ProduceRequest, Vec<(i32, Vec<u64>)>, u64) {
    let mut partitions: Vec<PartitionProduceData> = Vec::new();
    let mut batches = Vec::new();
    let mut taken = vec![false; stream.partitions.len()];
    let mut request_bytes = 0usize;
    let mut buffered = 0u64;
    let mut kept = VecDeque::with_capacity(ready.len());
    while let Some(batch) = ready.pop_front() {
        let fits =
            partitions.is_empty() || request_bytes + batch.records.len() <= REQUEST_BYTES_MAX;
        if taken[batch.slot] || !fits {
            kept.push_back(batch);
            continue;
        }
        taken[batch.slot] = true;
        request_bytes += batch.records.len();
        buffered += batch.send_ns.len() as u64 * (config.message_bytes as u64 + 16);
        let partition = stream.partitions[batch.slot];
        partitions.push(
            PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch.records)),
        );
        batches.push((partition, batch.send_ns));
    }
    *ready = kept;
    let mut request = ProduceRequest::default();
    request.acks = config.acks.wire();
    request.timeout_ms = 30_000;
    request.topic_data = vec![TopicProduceData::default()
        .with_name(config.topic.clone())
        .with_partition_data(partitions)];
    (request, batches, buffered)
}

async fn read_responses(
    mut reader: ResponseReader,
    in_flight: local_channel::LocalReceiver<InFlight>,
    slots: Rc<Semaphore>,
    stream_id: u64,
    control: Arc<Control>,
    stats: Rc<RefCell<CoreStats>>,
    message_bytes: u64,
) {
    while let Some(request) = in_flight.recv().await {
        let response = match reader
            .receive::<ProduceRequest>(request.correlation_id, PRODUCE_VERSION)
            .await
        {
            Ok(response) => response,
            Err(e) => {
                let lost: u64 = request.batches.iter().map(|(_, s)| s.len() as u64).sum();
                stats.borrow_mut().counters.errors += lost;
                control.note_error("connection lost", lost);
                control.abort(format!("producer {stream_id}: {e}"));
                slots.close();
                return;
            }
        };
        let acked_ns = now_ns();
        let mut stats = stats.borrow_mut();
        for (partition, send_ns) in &request.batches {
            let code = response
                .responses
                .iter()
                .flat_map(|t| &t.partition_responses)
                .find(|p| p.index == *partition)
                .map_or(
                    Some(kafka_protocol::ResponseError::UnknownServerError),
                    |p| p.error_code.err(),
                );
            let messages = send_ns.len() as u64;
            match code {
                None => {
                    for &sent in send_ns {
                        stats.record(Metric::Produce, acked_ns.saturating_sub(sent));
                    }
                    stats.counters.produced_messages += messages;
                    stats.counters.produced_bytes += messages * message_bytes;
                    control.add_acknowledged(messages);
                }
                Some(error) => {
                    stats.counters.errors += messages;
                    control.note_error(&format!("{error:?}"), messages);
                }
            }
        }
        slots.signal(1);
    }
}

/// Maps the process clock to wall-clock milliseconds (record timestamps), fixed at the
/// stream's start so no system call is made per record.
fn wall_clock_ms() -> impl Fn(u64) -> i64 {
    let wall_now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let clock_now_ns = now_ns();
    move |ns: u64| wall_now_ms + (ns as i64 - clock_now_ns as i64) / 1_000_000
}
