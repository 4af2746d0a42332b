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

use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
    rc::Rc,
    sync::Arc,
    time::Duration,
};

use bytes::Bytes;
use glommio::{channels::local_channel, sync::Semaphore};
use kafka_protocol::{
    error::ParseResponseErrorCode,
    messages::{
        produce_request::{PartitionProduceData, TopicProduceData},
        ProduceRequest, TopicName, TransactionalId,
    },
};

use weir_client::{
    connection::{self, ResponseReader},
    dialer::Dialer,
    record_batch::{BatchBuilder, Producer},
};

use crate::{
    clock::{instant_at, now_ns},
    control::Control,
    options::Acks,
    payload::{filler, push_payload},
    stats::{CoreStats, Metric},
    txn::{self, Transactions},
};

/// The Produce version loadgen speaks (Kafka 2.1+).
pub const PRODUCE_VERSION: i16 = 7;
/// A request carries at most this many bytes of batches (Kafka's max.request.size).
const REQUEST_BYTES_MAX: usize = 1 << 20;
/// How long the end of a run waits for outstanding acknowledgements.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What every producer stream of the run shares.
#[derive(Clone)]
pub struct ProducerConfig {
    /// The topic.
    pub topic: TopicName,
    /// The acknowledgement asked for.
    pub acks: Acks,
    /// Value bytes per message.
    pub message_bytes: usize,
    /// Keys to cycle through, if messages have keys.
    pub keys: Option<u64>,
    /// A batch is closed when it reaches this size.
    pub batch_bytes: usize,
    /// A batch is closed this long after its first message at the latest.
    pub linger_ns: u64,
    /// Requests in flight per connection.
    pub max_in_flight: u64,
    /// Unsent bytes a stream may hold before it stops generating.
    pub buffer_bytes: u64,
    /// How connections are opened (plain or TLS).
    pub dialer: Dialer,
    /// Who the producers are to the broker.
    pub identity: Identity,
}

/// Who a producer stream is to the broker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Identity {
    /// No producer id: batches are not numbered.
    Plain,
    /// A producer id; every batch numbered, so a retry is stored once.
    Idempotent,
    /// A transactional id of its own: numbered batches in transactions of `size`
    /// messages, `abort_ratio` of them aborted.
    Transactional {
        /// Messages per transaction.
        size: u64,
        /// Fraction of transactions aborted.
        abort_ratio: f64,
    },
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

/// What a stream's writer shares with its response reader: the request slots the
/// reader frees, and the count of messages the broker refused (a transaction with a
/// refused message is aborted).
struct Requests {
    slots: Rc<Semaphore>,
    failures: Rc<Cell<u64>>,
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
    let (mut writer, mut reader) =
        connection::connect_with(&config.dialer, &stream.leader, "loadgen")
            .await
            .map_err(|e| format!("producer {}: {e}", stream.id))?;
    let named = |e: String| format!("producer {}: {e}", stream.id);
    let mut txns = match config.identity {
        Identity::Transactional { size, abort_ratio } => Some(
            Transactions::start(
                &config.dialer,
                (&mut writer, &mut reader),
                format!(
                    "loadgen-{}-{}-{}",
                    std::process::id(),
                    control.start_ns,
                    stream.id
                ),
                config.topic.clone(),
                stream.partitions.clone(),
                size,
                abort_ratio,
            )
            .await
            .map_err(named)?,
        ),
        _ => None,
    };
    let producer = match (&txns, config.identity) {
        (Some(t), _) => Some(t.producer),
        (None, Identity::Idempotent) => Some(
            txn::idempotent_id(&mut writer, &mut reader)
                .await
                .map_err(named)?,
        ),
        _ => None,
    };
    let slots = Rc::new(Semaphore::new(config.max_in_flight));
    let failures = Rc::new(Cell::new(0u64));
    let requests = Requests {
        slots: slots.clone(),
        failures: failures.clone(),
    };
    let (in_flight_tx, in_flight_rx) = local_channel::new_unbounded::<InFlight>();
    let acknowledged = config.acks != Acks::None;
    let reader_task = acknowledged.then(|| {
        glommio::spawn_local(read_responses(
            reader,
            in_flight_rx,
            requests,
            stream.id,
            control.clone(),
            stats.clone(),
            config.message_bytes as u64,
        ))
        .detach()
    });

    let mut batches = Accumulator::new(stream, config, control.start_ns);
    batches.producer = producer;
    batches.transactional = txns.is_some();
    batches.transactional_id = txns.as_ref().map(|t| t.id.clone());
    let mut failures_at_begin = 0;
    loop {
        let now = now_ns();
        if let Some(t) = txns.as_mut().filter(|_| batches.cap.is_none()) {
            if control.stopping(now) || batches.quota_reached() {
                break;
            }
            t.begin().await.map_err(named)?;
            batches.cap = Some(batches.generated + t.size);
            failures_at_begin = failures.get();
        }
        batches.generate_due(now, control);
        let stopping = control.stopping(now) || batches.quota_reached();
        if let Some(t) = txns.as_mut() {
            if (stopping || batches.capped()) && batches.is_empty() {
                // Every message of the transaction is sent: wait for their answers, then
                // commit (or abort: as asked, or when one failed).
                let all = config.max_in_flight;
                if slots.acquire(all).await.is_err() {
                    return Ok(());
                }
                slots.signal(all);
                let commit = t.next_commits() && failures.get() == failures_at_begin;
                let asked = now_ns();
                t.end(commit).await.map_err(named)?;
                stats.borrow_mut().record(Metric::Commit, now_ns() - asked);
                batches.cap = None;
                continue;
            }
        }
        let flushing = stopping || batches.capped();
        if !batches.sendable(now, flushing) {
            if stopping && batches.is_empty() {
                break;
            }
            let mut wake_ns = batches.next_event_ns();
            if let Some(end) = control.end_ns {
                wake_ns = wake_ns.min(end);
            }
            let wait = instant_at(wake_ns).saturating_duration_since(instant_at(now_ns()));
            glommio::timer::sleep(wait.min(Duration::from_millis(100))).await;
            continue;
        }
        if slots.acquire(1).await.is_err() {
            return Ok(());
        }
        // Messages that fell due while every slot was busy join the batches about to go.
        let now = now_ns();
        batches.generate_due(now, control);
        let flushing = control.stopping(now) || batches.quota_reached() || batches.capped();
        let (request, sent) = batches.take_request(now, flushing);
        let correlation_id = writer
            .send(&request, PRODUCE_VERSION)
            .await
            .map_err(|e| format!("producer {}: {e}", stream.id))?;
        if acknowledged {
            let _ = in_flight_tx.try_send(InFlight {
                correlation_id,
                batches: sent,
            });
        } else {
            let written_ns = now_ns();
            let mut stats = stats.borrow_mut();
            for (_, send_ns) in &sent {
                acknowledge(
                    &mut stats,
                    control,
                    send_ns,
                    written_ns,
                    config.message_bytes as u64,
                );
            }
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

/// The stream's unsent messages: one open batch per partition, filling until it is full
/// (then it waits, closed, in `ready`) or until a request slot is free and its linger
/// has passed. A batch stays open while it waits for a slot, so messages that fall due
/// meanwhile join it instead of fragmenting into many small batches.
struct Accumulator<'a> {
    stream: &'a ProduceStream,
    config: &'a ProducerConfig,
    start_ns: u64,
    period_ns: f64,
    filler: Vec<u8>,
    wall_ms: Box<dyn Fn(u64) -> i64>,
    open: Vec<Option<OpenBatch>>,
    ready: VecDeque<ReadyBatch>,
    generated: u64,
    buffered_bytes: u64,
    /// The producer id and epoch batches carry, when the stream has one.
    producer: Option<(i64, i16)>,
    /// Whether batches belong to transactions.
    transactional: bool,
    /// The transactional id Produce requests carry, with transactions.
    transactional_id: Option<TransactionalId>,
    /// Each partition's next sequence number.
    next_sequence: Vec<i32>,
    /// With transactions: generation stops at this many messages until the open
    /// transaction ends.
    cap: Option<u64>,
}

impl<'a> Accumulator<'a> {
    fn new(stream: &'a ProduceStream, config: &'a ProducerConfig, start_ns: u64) -> Self {
        Accumulator {
            stream,
            config,
            start_ns,
            period_ns: if stream.rate > 0.0 {
                1e9 / stream.rate
            } else {
                0.0
            },
            filler: filler(config.message_bytes),
            wall_ms: Box::new(wall_clock_ms()),
            open: stream.partitions.iter().map(|_| None).collect(),
            ready: VecDeque::new(),
            generated: 0,
            buffered_bytes: 0,
            producer: None,
            transactional: false,
            transactional_id: None,
            next_sequence: vec![0; stream.partitions.len()],
            cap: None,
        }
    }

    /// True when the open transaction has all its messages.
    fn capped(&self) -> bool {
        self.cap.is_some_and(|c| self.generated >= c)
    }

    fn record_bytes(&self) -> u64 {
        self.config.message_bytes as u64 + 16 + if self.config.keys.is_some() { 8 } else { 0 }
    }

    /// When message `i` is due on the fixed schedule.
    fn due_ns(&self, i: u64) -> u64 {
        self.start_ns + (i as f64 * self.period_ns) as u64
    }

    fn quota_reached(&self) -> bool {
        self.stream.messages.is_some_and(|n| self.generated >= n)
    }

    fn is_empty(&self) -> bool {
        self.ready.is_empty() && self.open.iter().all(Option::is_none)
    }

    /// Appends the messages due by `now`, but once the run's time is up only those that
    /// fell due before its end: a wake-up after the end (a slot freed late, a busy core)
    /// still sends the schedule's last messages instead of dropping them, and open
    /// throttle generates nothing more. Nothing after an abort.
    fn generate_due(&mut self, now: u64, control: &Control) {
        if control.aborted() {
            return;
        }
        match control.end_ns {
            Some(end) if now >= end => {
                if self.period_ns > 0.0 {
                    self.generate(end - 1);
                }
            }
            _ => self.generate(now),
        }
    }

    /// Appends every message due by `now` (with a rate) or, in open throttle, until each
    /// partition has a full batch waiting; either way only while the buffer has room.
    fn generate(&mut self, now: u64) {
        let partitions = self.stream.partitions.len();
        while self.buffered_bytes < self.config.buffer_bytes
            && !self.quota_reached()
            && !self.capped()
        {
            let send_ns = if self.period_ns > 0.0 {
                let due = self.due_ns(self.generated);
                if due > now {
                    break;
                }
                due
            } else {
                if self.ready.len() >= partitions {
                    break;
                }
                now
            };
            let slot = (self.generated % partitions as u64) as usize;
            let (batch_bytes, message_bytes) = (self.config.batch_bytes, self.config.message_bytes);
            let timestamp_ms = (self.wall_ms)(send_ns);
            let (producer, transactional) = (self.producer, self.transactional);
            let sequence = &mut self.next_sequence[slot];
            let batch = self.open[slot].get_or_insert_with(|| {
                let mut builder = BatchBuilder::new(batch_bytes, timestamp_ms);
                if let Some((id, epoch)) = producer {
                    builder = builder.producer(Producer {
                        id,
                        epoch,
                        base_sequence: *sequence,
                    });
                }
                if transactional {
                    builder = builder.transactional();
                }
                OpenBatch {
                    builder,
                    send_ns: Vec::with_capacity(batch_bytes / message_bytes + 1),
                    opened_ns: send_ns,
                }
            });
            *sequence = if *sequence == i32::MAX {
                0
            } else {
                *sequence + 1
            };
            let key = self.config.keys.map(|n| (self.generated % n).to_be_bytes());
            push_payload(
                &mut batch.builder,
                key.as_ref().map(|k| &k[..]),
                timestamp_ms,
                message_bytes,
                send_ns,
                self.stream.id << 40 | self.generated,
                &self.filler,
            );
            batch.send_ns.push(send_ns);
            let full = batch.builder.bytes() >= batch_bytes;
            self.generated += 1;
            self.buffered_bytes += self.record_bytes();
            if full {
                self.close(slot);
            }
        }
    }

    fn close(&mut self, slot: usize) {
        if let Some(batch) = self.open[slot].take() {
            self.ready.push_back(ReadyBatch {
                slot,
                records: batch.builder.finish(),
                send_ns: batch.send_ns,
            });
        }
    }

    fn lingered(&self, batch: &OpenBatch, now: u64, stopping: bool) -> bool {
        stopping || batch.opened_ns.saturating_add(self.config.linger_ns) <= now
    }

    /// Whether a request could go now: a full batch waits, or an open one has lingered.
    fn sendable(&self, now: u64, stopping: bool) -> bool {
        !self.ready.is_empty()
            || self
                .open
                .iter()
                .flatten()
                .any(|b| self.lingered(b, now, stopping))
    }

    /// The next moment something changes: a message falls due or a batch's linger ends.
    fn next_event_ns(&self) -> u64 {
        let linger = self
            .open
            .iter()
            .flatten()
            .map(|b| b.opened_ns.saturating_add(self.config.linger_ns))
            .min()
            .unwrap_or(u64::MAX);
        if self.period_ns > 0.0
            && self.buffered_bytes < self.config.buffer_bytes
            && !self.quota_reached()
        {
            linger.min(self.due_ns(self.generated))
        } else {
            linger
        }
    }

    /// One Produce request: for each partition its oldest full batch or, failing that,
    /// its open batch if lingered; at most one batch per partition (Kafka's rule for
    /// v2 batches) and [`REQUEST_BYTES_MAX`] bytes unless that is a single batch.
    /// Returns the request and each batch's send times.
    fn take_request(&mut self, now: u64, stopping: bool) -> (ProduceRequest, Vec<(i32, Vec<u64>)>) {
        for slot in 0..self.open.len() {
            let waiting = self.ready.iter().any(|b| b.slot == slot);
            let lingered = self.open[slot]
                .as_ref()
                .is_some_and(|b| self.lingered(b, now, stopping));
            if lingered && !waiting {
                self.close(slot);
            }
        }
        let mut partitions: Vec<PartitionProduceData> = Vec::new();
        let mut sent = Vec::new();
        let mut taken = vec![false; self.stream.partitions.len()];
        let mut request_bytes = 0usize;
        let mut kept = VecDeque::with_capacity(self.ready.len());
        while let Some(batch) = self.ready.pop_front() {
            let fits =
                partitions.is_empty() || request_bytes + batch.records.len() <= REQUEST_BYTES_MAX;
            if taken[batch.slot] || !fits {
                kept.push_back(batch);
                continue;
            }
            taken[batch.slot] = true;
            request_bytes += batch.records.len();
            self.buffered_bytes -= batch.send_ns.len() as u64 * self.record_bytes();
            let partition = self.stream.partitions[batch.slot];
            partitions.push(
                PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch.records)),
            );
            sent.push((partition, batch.send_ns));
        }
        self.ready = kept;
        let mut request = ProduceRequest::default();
        request.acks = self.config.acks.wire();
        request.transactional_id = self.transactional_id.clone();
        request.timeout_ms = 30_000;
        request.topic_data = vec![TopicProduceData::default()
            .with_name(self.config.topic.clone())
            .with_partition_data(partitions)];
        (request, sent)
    }
}

async fn read_responses(
    mut reader: ResponseReader,
    in_flight: local_channel::LocalReceiver<InFlight>,
    requests: Requests,
    stream_id: u64,
    control: Arc<Control>,
    stats: Rc<RefCell<CoreStats>>,
    message_bytes: u64,
) {
    let Requests { slots, failures } = requests;
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
            match code {
                None => acknowledge(&mut stats, &control, send_ns, acked_ns, message_bytes),
                Some(error) => {
                    let messages = send_ns.len() as u64;
                    failures.set(failures.get() + messages);
                    stats.counters.errors += messages;
                    control.note_error(&format!("{error:?}"), messages);
                }
            }
        }
        slots.signal(1);
    }
}

/// Counts one batch's messages as acknowledged at `acked_ns` (for acks=0: written) and
/// records each one's latency from its send time.
fn acknowledge(
    stats: &mut CoreStats,
    control: &Control,
    send_ns: &[u64],
    acked_ns: u64,
    message_bytes: u64,
) {
    for &sent in send_ns {
        stats.record(Metric::Produce, acked_ns.saturating_sub(sent));
    }
    let messages = send_ns.len() as u64;
    stats.counters.produced_messages += messages;
    stats.counters.produced_bytes += messages * message_bytes;
    control.add_acknowledged(messages);
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

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;
    use weir_client::record_batch::{
        be_i16, be_i32, be_i64, ATTRIBUTES_AT, ATTRIBUTE_TRANSACTIONAL, BASE_SEQUENCE_AT,
        PRODUCER_EPOCH_AT, PRODUCER_ID_AT,
    };

    fn config(batch_bytes: usize, linger_ns: u64) -> ProducerConfig {
        ProducerConfig {
            topic: TopicName(StrBytes::from_static_str("t")),
            acks: Acks::All,
            message_bytes: 100,
            keys: None,
            batch_bytes,
            linger_ns,
            max_in_flight: 5,
            buffer_bytes: 1 << 20,
            dialer: Dialer::plaintext(),
            identity: Identity::Plain,
        }
    }

    fn stream(rate: f64) -> ProduceStream {
        ProduceStream {
            id: 1,
            leader: "x:1".into(),
            partitions: vec![3, 4],
            rate,
            messages: None,
        }
    }

    fn counts(sent: &[(i32, Vec<u64>)]) -> Vec<(i32, usize)> {
        sent.iter().map(|(p, s)| (*p, s.len())).collect()
    }

    #[test]
    fn messages_are_due_on_the_schedule_and_batches_grow_while_no_slot_is_free() {
        let (s, c) = (stream(1000.0), config(1 << 20, 0));
        let mut a = Accumulator::new(&s, &c, 0);
        a.generate(9_999_999);
        assert_eq!(
            a.generated, 10,
            "one message per millisecond, the first at 0"
        );
        // No slot was free meanwhile: the same open batches take the next messages.
        a.generate(19_999_999);
        assert!(a.sendable(19_999_999, false));
        let (_, sent) = a.take_request(19_999_999, false);
        assert_eq!(counts(&sent), vec![(3, 10), (4, 10)]);
        assert!(sent[0].1.windows(2).all(|w| w[1] - w[0] == 2_000_000));
        assert!(a.is_empty());
        assert_eq!(a.next_event_ns(), 20_000_000);
    }

    #[test]
    fn a_wake_up_after_the_end_still_sends_every_message_due_before_it() {
        let (s, c) = (stream(1000.0), config(1 << 20, 0));
        let mut a = Accumulator::new(&s, &c, 0);
        let control = Control::new(0, Some(3_000_000_000), 1);
        a.generate_due(2_000_000_000, &control);
        assert_eq!(a.generated, 2001);
        a.generate_due(3_014_000_000, &control);
        assert_eq!(a.generated, 3000, "due before the end: 0 ms .. 2,999 ms");
        let (o, c) = (stream(0.0), config(1 << 20, 0));
        let mut open = Accumulator::new(&o, &c, 0);
        open.generate_due(3_000_000_000, &control);
        assert_eq!(open.generated, 0, "open throttle stops at the end");
    }

    #[test]
    fn an_idempotent_streams_batches_number_each_partitions_records_and_a_cap_holds() {
        let (s, c) = (stream(1000.0), config(1 << 20, 0));
        let mut a = Accumulator::new(&s, &c, 0);
        a.producer = Some((7, 2));
        a.transactional = true;
        a.cap = Some(6);
        a.generate(9_999_999);
        assert_eq!(a.generated, 6, "the transaction's cap stops generation");
        assert!(a.capped());
        let (request, _) = a.take_request(9_999_999, true);
        let batches: Vec<_> = request.topic_data[0]
            .partition_data
            .iter()
            .map(|p| p.records.clone().expect("records"))
            .collect();
        for b in &batches {
            assert_eq!(be_i64(b, PRODUCER_ID_AT), 7);
            assert_eq!(be_i16(b, PRODUCER_EPOCH_AT), 2);
            assert_eq!(be_i32(b, BASE_SEQUENCE_AT), 0);
            assert_ne!(be_i16(b, ATTRIBUTES_AT) & ATTRIBUTE_TRANSACTIONAL, 0);
        }
        a.cap = Some(10);
        a.generate(9_999_999);
        let (request, _) = a.take_request(9_999_999, true);
        let next = request.topic_data[0].partition_data[0].records.clone();
        assert_eq!(
            be_i32(&next.expect("records"), BASE_SEQUENCE_AT),
            3,
            "a partition's second batch continues its sequence"
        );
    }

    #[test]
    fn a_full_batch_goes_first_and_the_next_one_stays_open() {
        let s = ProduceStream {
            messages: Some(18),
            ..stream(0.0)
        };
        let c = config(61 + 3 * 120, 1_000_000_000);
        let mut a = Accumulator::new(&s, &c, 0);
        a.generate(5);
        assert_eq!(
            a.ready.len(),
            2,
            "open throttle fills one batch per partition"
        );
        assert!(a.sendable(5, false));
        let (_, sent) = a.take_request(5, false);
        assert_eq!(counts(&sent), vec![(3, 4), (4, 4)]);
        a.generate(6);
        let (_, sent) = a.take_request(7, false);
        assert_eq!(counts(&sent), vec![(3, 4), (4, 4)], "the next full batches");
        a.generate(8);
        assert_eq!(a.generated, 18, "the message count caps generation");
        assert!(!a.sendable(8, false), "nothing full, linger not over");
        assert!(a.sendable(7, true), "stopping sends what is open");
    }
}
