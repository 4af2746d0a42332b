//! The broker's group commit, sampled every second from its metrics into `commits.csv`:
//! rounds, seconds in rounds and in fdatasync, slow rounds (counters since start) and the
//! interval in force — what it did in a second where the broker fell behind.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crate::common::broker::http_exchange;

const SERIES: [&str; 5] = [
    "weir_flush_rounds_total",
    "weir_flush_round_seconds_sum",
    "weir_flush_sync_seconds_sum",
    "weir_flush_slow_rounds_total",
    "weir_flush_interval_seconds",
];

/// A running sampler; [`stop`](CommitSampler::stop) returns the CSV.
pub struct CommitSampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<String>,
}

/// The sum over shards of each of [`SERIES`] in the exposition at `addr`.
fn sample(addr: &str) -> Option<[f64; 5]> {
    let request = b"GET /metrics HTTP/1.1\r\nHost: soak\r\n\r\n";
    let text = http_exchange(addr, request, Duration::from_secs(2)).ok()?;
    let mut sums = [0.0; 5];
    for line in text.lines() {
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        if let Some(i) = SERIES.iter().position(|s| *s == name) {
            sums[i] += line.rsplit(' ').next()?.parse::<f64>().ok()?;
        }
    }
    Some(sums)
}

impl CommitSampler {
    pub fn start(addr: String) -> CommitSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut csv = format!("second,{}\n", SERIES.join(","));
            let began = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                if let Some(v) = sample(&addr) {
                    let values: Vec<String> = v.iter().map(f64::to_string).collect();
                    let t = began.elapsed().as_secs();
                    csv.push_str(&format!("{t},{}\n", values.join(",")));
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            csv
        });
        CommitSampler { stop, thread }
    }

    pub fn stop(self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("commit sampler")
    }
}

/// The mean fdatasync time per flush round, in ms, over the rows of `csv` (from
/// [`CommitSampler::stop`]): how fast the device flushed during the run.
pub fn mean_sync_ms(csv: &str) -> Option<f64> {
    let rows: Vec<Vec<f64>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').filter_map(|v| v.parse().ok()).collect())
        .filter(|r: &Vec<f64>| r.len() == SERIES.len() + 1)
        .collect();
    let (first, last) = (rows.first()?, rows.last()?);
    // Columns: second, rounds, round seconds, sync seconds, …
    let rounds = last[1] - first[1];
    (rounds > 0.0).then(|| (last[3] - first[3]) / rounds * 1000.0)
}
