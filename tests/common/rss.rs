//! A process's resident memory, read from `/proc/PID/status`, sampled on a thread.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// Resident memory of process `pid` in bytes (0 once it is gone).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Samples a process's RSS every `period` until stopped.
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<(Duration, u64)>>,
}

impl RssSampler {
    /// Starts sampling `pid` now.
    pub fn start(pid: u32, period: Duration) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let mut samples = Vec::new();
            let mut next = started;
            while !flag.load(Ordering::Acquire) {
                samples.push((started.elapsed(), rss_bytes(pid)));
                next += period;
                while !flag.load(Ordering::Acquire) && Instant::now() < next {
                    std::thread::sleep(Duration::from_millis(10).min(period));
                }
            }
            samples
        });
        RssSampler { stop, thread }
    }

    /// Stops and returns the samples: time since the start, bytes.
    pub fn stop(self) -> Vec<(Duration, u64)> {
        self.stop.store(true, Ordering::Release);
        self.thread.join().expect("RSS sampler")
    }

    /// Stops and returns the largest sample.
    pub fn peak(self) -> u64 {
        self.stop().into_iter().map(|(_, b)| b).max().unwrap_or(0)
    }
}
