//! A producer stream's unsent messages (see [`Accumulator`]): generated on the stream's
//! schedule, numbered when the stream has a producer id, batched per partition, and
//! taken a Produce request at a time.

use std::collections::VecDeque;

use bytes::Bytes;
use kafka_protocol::messages::{
    produce_request::{PartitionProduceData, TopicProduceData},
    ProduceRequest, TopicName, TransactionalId,
};
use weir_client::{
    dialer::Dialer,
    record_batch::{BatchBuilder, Producer},
};

use crate::{
    clock::now_ns,
    control::Control,
    options::Acks,
    payload::{filler, push_payload},
};

/// A request carries at most this many bytes of batches (Kafka's max.request.size).
const REQUEST_BYTES_MAX: usize = 1 << 20;

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
    /// A transactional id of its own: numbered batches in transactions as `TxnPlan`
    /// says.
    Transactional(TxnPlan),
}

/// How a transactional stream runs its transactions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TxnPlan {
    /// Messages per transaction.
    pub size: u64,
    /// Fraction of transactions aborted.
    pub abort_ratio: f64,
    /// Speak transactions V1 even where the broker offers V2.
    pub v1_only: bool,
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

/// The stream's unsent messages: one open batch per partition, filling until it is full
/// (then it waits, closed, in `ready`) or until a request slot is free and its linger
/// has passed. A batch stays open while it waits for a slot, so messages that fall due
/// meanwhile join it instead of fragmenting into many small batches.
pub(crate) struct Accumulator<'a> {
    stream: &'a ProduceStream,
    config: &'a ProducerConfig,
    start_ns: u64,
    period_ns: f64,
    filler: Vec<u8>,
    wall_ms: Box<dyn Fn(u64) -> i64>,
    open: Vec<Option<OpenBatch>>,
    ready: VecDeque<ReadyBatch>,
    pub(crate) generated: u64,
    buffered_bytes: u64,
    /// The producer id and epoch batches carry, when the stream has one.
    pub(crate) producer: Option<(i64, i16)>,
    /// Whether batches belong to transactions.
    pub(crate) transactional: bool,
    /// The transactional id Produce requests carry, with transactions.
    pub(crate) transactional_id: Option<TransactionalId>,
    /// Each partition's next sequence number.
    next_sequence: Vec<i32>,
    /// With transactions: generation stops at this many messages until the open
    /// transaction ends.
    pub(crate) cap: Option<u64>,
}

impl<'a> Accumulator<'a> {
    pub(crate) fn new(
        stream: &'a ProduceStream,
        config: &'a ProducerConfig,
        start_ns: u64,
    ) -> Self {
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

    /// Transactions V2: the next transaction's batches carry `producer` (a new epoch,
    /// or a new producer id), each partition's sequence starting again at 0. Called
    /// between transactions, when no batch is waiting.
    pub(crate) fn restart_sequences(&mut self, producer: (i64, i16)) {
        self.producer = Some(producer);
        self.next_sequence.fill(0);
    }

    /// True when the open transaction has all its messages.
    pub(crate) fn capped(&self) -> bool {
        self.cap.is_some_and(|c| self.generated >= c)
    }

    fn record_bytes(&self) -> u64 {
        self.config.message_bytes as u64 + 16 + if self.config.keys.is_some() { 8 } else { 0 }
    }

    /// When message `i` is due on the fixed schedule.
    fn due_ns(&self, i: u64) -> u64 {
        self.start_ns + (i as f64 * self.period_ns) as u64
    }

    pub(crate) fn quota_reached(&self) -> bool {
        self.stream.messages.is_some_and(|n| self.generated >= n)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ready.is_empty() && self.open.iter().all(Option::is_none)
    }

    /// Appends the messages due by `now`, but once the run's time is up only those that
    /// fell due before its end: a wake-up after the end (a slot freed late, a busy core)
    /// still sends the schedule's last messages instead of dropping them, and open
    /// throttle generates nothing more. Nothing after an abort.
    pub(crate) fn generate_due(&mut self, now: u64, control: &Control) {
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
    pub(crate) fn sendable(&self, now: u64, stopping: bool) -> bool {
        !self.ready.is_empty()
            || self
                .open
                .iter()
                .flatten()
                .any(|b| self.lingered(b, now, stopping))
    }

    /// The next moment something changes: a message falls due or a batch's linger ends.
    pub(crate) fn next_event_ns(&self) -> u64 {
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
    pub(crate) fn take_request(
        &mut self,
        now: u64,
        stopping: bool,
    ) -> (ProduceRequest, Vec<(i32, Vec<u64>)>) {
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
