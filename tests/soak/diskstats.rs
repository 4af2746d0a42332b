//! The device's counters, from `/proc/diskstats`: how many bytes reach the disk per
//! byte produced, what it trims, and its stalls.

use std::{
    os::unix::fs::MetadataExt,
    path::Path,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

/// The `/proc/diskstats` name of the device holding `path`.
pub fn device_of(path: &Path) -> Option<String> {
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let stats = std::fs::read_to_string("/proc/diskstats").ok()?;
    stats.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 9 && f[0] == major.to_string() && f[1] == minor.to_string())
            .then(|| f[2].to_string())
    })
}

/// `device`'s counters from `/proc/diskstats`, in the kernel's order (reads
/// completed first; fields a kernel does not have read as 0).
fn counters(device: &str) -> Option<[u64; 17]> {
    let stats = std::fs::read_to_string("/proc/diskstats").ok()?;
    let line = stats
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some(device))?;
    let mut c = [0u64; 17];
    for (slot, v) in c.iter_mut().zip(line.split_whitespace().skip(3)) {
        *slot = v.parse().ok()?;
    }
    Some(c)
}

/// What a device did since boot, or between two samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Bytes written.
    pub written: u64,
    /// Bytes discarded (trims: on a discard-mounted ext4, blocks freed by a deletion or
    /// a truncation).
    pub discarded: u64,
    /// Cache flushes completed (fdatasyncs that reached the device).
    pub flushes: u64,
}

impl Totals {
    /// What the device did between `before` and `self`.
    pub fn since(self, before: Totals) -> Totals {
        Totals {
            written: self.written.saturating_sub(before.written),
            discarded: self.discarded.saturating_sub(before.discarded),
            flushes: self.flushes.saturating_sub(before.flushes),
        }
    }
}

/// `device`'s totals since boot (sectors are 512 bytes in `/proc/diskstats`).
pub fn totals(device: &str) -> Option<Totals> {
    counters(device).map(|c| Totals {
        written: c[6] * 512,
        discarded: c[13] * 512,
        flushes: c[15],
    })
}

/// I/Os `device` completed (reads, writes, discards, flushes) and has in flight.
fn progress(device: &str) -> Option<(u64, u64)> {
    counters(device).map(|c| (c[0] + c[4] + c[11] + c[15], c[8]))
}

/// A stretch in which the device completed no I/O at all while some was in flight.
#[derive(Debug, Clone, Copy)]
pub struct Stall {
    /// When it began, from the sampler's start.
    pub at: Duration,
    /// How long it lasted (to the sampling step).
    pub length: Duration,
}

/// Samples the device every 20 ms on a thread and keeps its stalls of 100 ms or
/// more: a device that stops answering holds every flush round, whatever the broker
/// does, so the soak can tell the disk's spikes from the broker's.
pub struct StallSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Stall>>,
}

const STEP: Duration = Duration::from_millis(20);
const STALL_MIN: Duration = Duration::from_millis(100);

impl StallSampler {
    /// Starts sampling `device`.
    pub fn start(device: String) -> StallSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut stalls = Vec::new();
            let mut last = progress(&device);
            let mut still_since: Option<Instant> = None;
            while !stopping.load(Ordering::Relaxed) {
                std::thread::sleep(STEP);
                let now = progress(&device);
                let stuck = matches!((last, now), (Some((a, _)), Some((b, inflight))) if a == b && inflight > 0);
                match (stuck, still_since) {
                    (true, None) => still_since = Some(Instant::now() - STEP),
                    (false, Some(since)) => {
                        let length = since.elapsed();
                        if length >= STALL_MIN {
                            stalls.push(Stall {
                                at: since - start,
                                length,
                            });
                        }
                        still_since = None;
                    }
                    _ => {}
                }
                last = now;
            }
            stalls
        });
        StallSampler { stop, thread }
    }

    /// Stops sampling; the stalls seen.
    pub fn stop(self) -> Vec<Stall> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("stall sampler")
    }
}
