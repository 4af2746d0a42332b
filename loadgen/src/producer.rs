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
    rc::Rc,
    sync::Arc,
    time::Duration,
};

use glommio::{channels::local_channel, sync::Semaphore};
use kafka_protocol::{error::ParseResponseErrorCode, messages::ProduceRequest};

use weir_client::connection::{self, ResponseReader};

pub use crate::accumulator::{Identity, ProduceStream, ProducerConfig, TxnPlan};
use crate::{
    accumulator::Accumulator,
    clock::{instant_at, now_ns},
    control::Control,
    options::Acks,
    stats::{CoreStats, Metric},
    txn::{self, Transactions},
};

/// The Produce version loadgen speaks (Kafka 2.1+).
pub const PRODUCE_VERSION: i16 = 7;
/// How long the end of a run waits for outstanding acknowledgements.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What a stream's writer shares with its response reader: the request slots the
/// reader frees, and the count of messages the broker refused (a transaction with a
/// refused message is aborted).
struct Requests {
    slots: Rc<Semaphore>,
    failures: Rc<Cell<u64>>,
    /// The Produce version the requests are sent at (V2 transactions need 12).
    version: i16,
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
        Identity::Transactional(plan) => Some(
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
                plan,
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
    let version = match &txns {
        Some(t) if t.v2 => txn::PRODUCE_V2_VERSION,
        _ => PRODUCE_VERSION,
    };
    let slots = Rc::new(Semaphore::new(config.max_in_flight));
    let failures = Rc::new(Cell::new(0u64));
    let requests = Requests {
        slots: slots.clone(),
        failures: failures.clone(),
        version,
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
            if !t.v2 {
                let asked = now_ns();
                t.begin().await.map_err(named)?;
                stats.borrow_mut().record(Metric::Begin, now_ns() - asked);
            }
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
                let next = t.end(commit).await.map_err(named)?;
                stats.borrow_mut().record(Metric::Commit, now_ns() - asked);
                if let Some(producer) = next {
                    batches.restart_sequences(producer);
                }
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
            .send(&request, version)
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

async fn read_responses(
    mut reader: ResponseReader,
    in_flight: local_channel::LocalReceiver<InFlight>,
    requests: Requests,
    stream_id: u64,
    control: Arc<Control>,
    stats: Rc<RefCell<CoreStats>>,
    message_bytes: u64,
) {
    let Requests {
        slots,
        failures,
        version,
    } = requests;
    while let Some(request) = in_flight.recv().await {
        let response = match reader
            .receive::<ProduceRequest>(request.correlation_id, version)
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
