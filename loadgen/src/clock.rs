//! One monotonic clock for every thread of the run, in nanoseconds.
//!
//! Send times travel inside records from a producer task to a consumer task that may run
//! on another core, so both must read the same clock: `Instant` is CLOCK_MONOTONIC,
//! shared by all threads of the process, measured here from one process-wide origin.

use std::{sync::OnceLock, time::Instant};

static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the process-wide origin (the first call). Never decreases.
pub fn now_ns() -> u64 {
    let origin = ORIGIN.get_or_init(Instant::now);
    origin.elapsed().as_nanos() as u64
}

/// Converts a process-clock reading back to an `Instant`, for timers.
pub fn instant_at(ns: u64) -> Instant {
    let origin = *ORIGIN.get_or_init(Instant::now);
    origin + std::time::Duration::from_nanos(ns)
}
