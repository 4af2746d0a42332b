//! Slow and dead clients beside healthy ones, through the real broker: a consumer that
//! pipelines fetches of a large backlog and never reads the answers, clients that send
//! one byte per second, and 5,000 connections opened and dropped. A loadgen e2e run
//! (producers and consumers) measured undisturbed and then beside them must keep its
//! throughput within 20%, lose nothing, and the broker's resident memory must stay
//! bounded; the peak RSS of both runs is printed. The broker closes the dead consumer
//! once it has accepted no bytes for the idle timeout.
//!
//! `WEIR_SLOW_RATE` sets the loadgen rate in messages per second (default 4000; 0 = open
//! throttle, which on a shared 2-core machine measures the machine more than the
//! broker, so the test command uses a fixed rate). By hand, on an idle machine:
//! `cargo build --release -p loadgen && WEIR_SLOW_RATE=0 cargo test --release --test
//! broker_slow_clients -- --nocapture`.

#[allow(dead_code)]
mod common;

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use common::{
    broker::Broker,
    kafka_client::{connect, create, fetch_request, frame, produce},
    loadgen::{run_loadgen, summary},
    rss::RssSampler,
    scratch_dir,
};
use weir_client::record_batch::build_batch;

/// The broker's idle timeout in this test: a client that neither sends a byte nor
/// accepts one for this long is disconnected.
const IDLE_TIMEOUT: &str = "3s";

/// Fetches the dead consumer pipelines, each for up to 50 MiB (librdkafka's default
/// `fetch.max.bytes`) of an 8 MiB backlog.
const DEAD_FETCHES: usize = 64;

/// Backlog the dead consumer asks for.
const BACKLOG_BYTES: usize = 8 << 20;

/// One loadgen e2e run of 4 s on topic `work`; returns (produced msgs/s, summary).
fn e2e(broker: &Broker, out: &Path, rate: &str) -> (f64, serde_json::Value) {
    let bootstrap = broker.bootstrap();
    run_loadgen(
        &[
            "e2e",
            "--bootstrap",
            &bootstrap,
            "--topic",
            "work",
            "--partitions",
            "4",
            "--message-size",
            "512",
            "--rate",
            rate,
            "--duration",
            "4s",
            "--cores",
            "1",
            "--out",
            out.to_str().expect("utf-8 path"),
        ],
        broker,
        0,
    );
    let s = summary(out);
    let produced = s["produce"]["messages"].as_u64().expect("produced");
    assert_eq!(s["errors"], 0, "{s}");
    assert_eq!(s["consume"]["messages"].as_u64(), Some(produced), "{s}");
    let rate = s["produce"]["messages_per_second"].as_f64().expect("rate");
    (rate, s)
}

/// A consumer that asks for the backlog many times over and never reads an answer.
fn dead_consumer(port: u16) -> TcpStream {
    let mut s = connect(port);
    let request = frame(&fetch_request("backlog", 0, 0, 50 << 20), 12);
    for _ in 0..DEAD_FETCHES {
        s.write_all(&request).expect("send fetch");
    }
    s
}

/// Clients that announce a 1 MiB request and then send it one byte per second.
fn one_byte_per_second(port: u16, clients: usize, stop: Arc<AtomicBool>) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut streams: Vec<TcpStream> = (0..clients).map(|_| connect(port)).collect();
        for s in &mut streams {
            s.write_all(&(1i32 << 20).to_be_bytes()).expect("length");
        }
        let mut sent = 0u64;
        while !stop.load(Ordering::Acquire) {
            for s in &mut streams {
                s.write_all(&[0]).expect("slow client still connected");
                sent += 1;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        sent
    })
}

/// Opens and drops `total` connections in waves of 500 held at once: a third send
/// half a request, a third a whole ApiVersions request they never read, a third
/// nothing.
fn churn(port: u16, total: usize, done: Arc<AtomicU64>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let api_versions = frame(&kafka_protocol::messages::ApiVersionsRequest::default(), 3);
        let mut opened = 0;
        while opened < total {
            let wave: Vec<TcpStream> = (0..500.min(total - opened))
                .map(|i| {
                    let mut s = connect(port);
                    match i % 3 {
                        0 => {
                            let _ = s.write_all(&api_versions[..api_versions.len() / 2]);
                        }
                        1 => {
                            let _ = s.write_all(&api_versions);
                        }
                        _ => {}
                    }
                    s
                })
                .collect();
            opened += wave.len();
            std::thread::sleep(Duration::from_millis(300));
            drop(wave);
            done.store(opened as u64, Ordering::Release);
        }
    })
}

#[test]
fn slow_and_dead_clients_leave_others_their_throughput_and_memory_bounded() {
    let rate = std::env::var("WEIR_SLOW_RATE").unwrap_or_else(|_| "4000".into());
    let dir = scratch_dir();
    let broker = Broker::start(
        &dir.path().join("data"),
        1,
        // A small batch cache fills during the warm-up run, so it does not grow between
        // the two measured runs and the RSS difference is what the clients cost.
        &["--idle-timeout", IDLE_TIMEOUT, "--cache-bytes", "16777216"],
    );
    let pid = broker.pid().expect("pid");
    assert_eq!(create(broker.port, "backlog", 1), 0);
    let batch = build_batch(64, &[7u8; 4000], 1_700_000_000_000);
    for _ in 0..BACKLOG_BYTES / batch.len() {
        assert_eq!(produce(broker.port, "backlog", 0, batch.clone()).0, 0);
    }

    // A first run creates the topic and brings the broker to its working size.
    e2e(&broker, &dir.path().join("warm-up"), &rate);
    let sampler = RssSampler::start(pid, Duration::from_millis(50));
    let (undisturbed, _) = e2e(&broker, &dir.path().join("undisturbed"), &rate);
    let calm_peak = sampler.peak();

    let started = Instant::now();
    let sampler = RssSampler::start(pid, Duration::from_millis(50));
    let mut dead = dead_consumer(broker.port);
    let stop = Arc::new(AtomicBool::new(false));
    let slow = one_byte_per_second(broker.port, 20, Arc::clone(&stop));
    let dropped = Arc::new(AtomicU64::new(0));
    let churner = churn(broker.port, 5000, Arc::clone(&dropped));
    let (disturbed, _) = e2e(&broker, &dir.path().join("disturbed"), &rate);
    churner.join().expect("churn");
    let busy_peak = sampler.peak();
    stop.store(true, Ordering::Release);
    let slow_bytes = slow.join().expect("slow clients");

    // The dead consumer was cut off: draining its socket now ends (end of file, or a
    // reset for the requests the broker left unread) well short of what it asked for.
    let one_answer = BACKLOG_BYTES;
    dead.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut received = 0usize;
    let mut sink = vec![0u8; 1 << 20];
    let ended = loop {
        match dead.read(&mut sink) {
            Ok(0) => break true,
            Ok(n) => received += n,
            Err(e) => {
                break !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    };
    assert!(
        ended && received < DEAD_FETCHES * one_answer / 2,
        "the dead consumer was not disconnected ({received} bytes readable)"
    );

    let ratio = disturbed / undisturbed;
    println!(
        "rate {rate}: undisturbed {undisturbed:.0} msgs/s, disturbed {disturbed:.0} msgs/s \
         (ratio {ratio:.3}); peak RSS undisturbed {:.1} MiB, disturbed {:.1} MiB; \
         {} connections dropped, {slow_bytes} slow bytes, dead consumer cut off after \
         {received} bytes, {:.1} s",
        calm_peak as f64 / 1048576.0,
        busy_peak as f64 / 1048576.0,
        dropped.load(Ordering::Acquire),
        started.elapsed().as_secs_f64()
    );
    assert!(ratio >= 0.8, "throughput fell to {ratio:.3} of undisturbed");
    // Beside the clients' sockets, what the broker may hold for them: the dead
    // consumer's one admitted answer (8 MiB read, 8 MiB encoded), 500 connections open
    // at once, the slow clients' partial requests.
    assert!(
        busy_peak < calm_peak + (64 << 20),
        "peak RSS grew from {calm_peak} to {busy_peak} bytes beside slow and dead clients"
    );
    assert_eq!(dropped.load(Ordering::Acquire), 5000);
    // The broker still serves a plain client.
    assert_eq!(produce(broker.port, "work", 0, batch).0, 0);
}
