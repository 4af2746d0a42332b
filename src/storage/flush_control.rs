//! The adaptive group commit (`--flush-target-p99`): each shard picks its own commit
//! interval from what it measures, so one setting serves an idle shard, a saturated one
//! and every load between, without hand tuning.
//!
//! What it measures, per round: the *commit wait* — from the first append the round
//! carries to the round's end, i.e. the longest any acknowledgement in it waited for the
//! group commit — and the round's fdatasync time. Per control period
//! ([`PERIOD`], 100 ms): the p99 of the commit waits, the share of round time spent in
//! fdatasync, and how busy the shard's reactor was (its run time over wall time,
//! spinning excluded).
//!
//! How it reacts, once per period:
//! - p99 commit wait above the target: the interval halves (to zero below
//!   [`STEP`]) — latency first, at once;
//! - the reactor saturated (busy ≥ [`BUSY_HIGH`]) with fdatasync a large share of each
//!   round ([`SYNC_SHARE`]): the shard spends its CPU on many small rounds, so fewer,
//!   larger ones leave more for requests: the interval grows by [`STEP`] while the p99
//!   stays under [`HEADROOM`] of the target;
//! - the same share of fdatasync with the reactor busy between [`BUSY_LOW`] and
//!   [`BUSY_HIGH`]: it holds, so it does not flap at the edge;
//! - otherwise — spare CPU, or CPU-bound rounds that fewer flushes would not help — the
//!   interval halves towards zero. A busy device alone is no reason to wait: rounds are
//!   pipelined (see [`super::flush`]), so appends arriving during one round's
//!   fdatasync already gather into the next round, which grows with the load by itself
//!   (measured with one fixed interval against another: before the pipelining, growing
//!   the interval on a device busy flushing helped 200 partitions at 100 msgs/s; after
//!   it, a zero interval had the lower p99 at 10%, 50% and 100% of the maximum and at
//!   200 partitions).
//!
//! Not steered: how long an idle shard polls before sleeping. glommio 0.9 reads
//! `spin_before_park` once when its executor starts running, and a spinning task cannot
//! stand in for it — an always-ready task queue keeps the executor in its run-queue loop
//! until the preempt timer fires, so io_uring completions would wait for the timer.
//! Polling stays a setting (`--spin-before-park`; docs/architecture.md "Adaptive group commit" has
//! what it buys).
//!
//! Bounds: the interval stays within `[0, target / 2]`. Durability is never traded: the
//! controller only moves *when* a round starts; every acknowledgement still waits for its
//! round's writes and fdatasync (the scheduler's code path is the same as with a fixed
//! interval), and `dirty_bytes_max` still starts a round early.

use std::time::{Duration, Instant};

/// How often the controller decides.
pub const PERIOD: Duration = Duration::from_millis(100);

/// Interval step when growing; below it a shrinking interval becomes zero.
pub const STEP: Duration = Duration::from_micros(25);

/// Reactor busy fraction at which the shard counts as saturated.
pub const BUSY_HIGH: f64 = 0.9;

/// Reactor busy fraction under which the interval falls back towards zero.
pub const BUSY_LOW: f64 = 0.75;

/// Share of round time spent in fdatasync above which a busy shard's rounds count as
/// flush-bound.
pub const SYNC_SHARE: f64 = 0.5;

/// The interval only grows while the p99 commit wait is below this share of the target.
pub const HEADROOM: f64 = 0.7;

/// Commit waits kept per period for its p99; rounds past this in one period are not
/// sampled (at [`PERIOD`] that is a round every 50 µs, faster than this disk flushes).
const SAMPLES_MAX: usize = 2048;

/// One finished round, as the controller sees it.
#[derive(Debug, Clone, Copy)]
pub struct RoundSample {
    /// From the round's first append to its end.
    pub commit_wait: Duration,
    /// The whole round: writes and fdatasync.
    pub round: Duration,
    /// Its fdatasync.
    pub sync: Duration,
}

/// The adaptive controller of one shard (see the module docs).
#[derive(Debug)]
pub struct FlushController {
    target: Duration,
    interval: Duration,
    period_start: Instant,
    busy_at_start: Duration,
    waits_us: Vec<u32>,
    round_time: Duration,
    sync_time: Duration,
}

/// What one period measured, and the interval chosen for the next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// p99 commit wait over the period.
    pub p99: Duration,
    /// Reactor busy fraction over the period.
    pub busy: f64,
    /// Share of the period's round time spent in fdatasync.
    pub sync_share: f64,
    /// The interval from now on.
    pub interval: Duration,
}

impl FlushController {
    /// A controller keeping the p99 commit wait under `target`, starting at interval 0.
    /// `busy` is the reactor's run time so far.
    pub fn new(target: Duration, now: Instant, busy: Duration) -> FlushController {
        FlushController {
            target,
            interval: Duration::ZERO,
            period_start: now,
            busy_at_start: busy,
            waits_us: Vec::with_capacity(SAMPLES_MAX),
            round_time: Duration::ZERO,
            sync_time: Duration::ZERO,
        }
    }

    /// The interval in force.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The largest interval it will choose.
    pub fn interval_max(&self) -> Duration {
        self.target / 2
    }

    /// Records a finished round.
    pub fn record(&mut self, sample: RoundSample) {
        if self.waits_us.len() < SAMPLES_MAX {
            self.waits_us
                .push(sample.commit_wait.as_micros().min(u128::from(u32::MAX)) as u32);
        }
        self.round_time += sample.round;
        self.sync_time += sample.sync;
    }

    /// Ends the period when [`PERIOD`] has passed since it began: decides the next
    /// interval from what it measured and starts a new period. `busy` gives the
    /// reactor's run time so far (asked only when a period ends). `None` while the
    /// period runs.
    pub fn tick(&mut self, now: Instant, busy: impl FnOnce() -> Duration) -> Option<Decision> {
        let wall = now.saturating_duration_since(self.period_start);
        if wall < PERIOD {
            return None;
        }
        let busy = busy();
        let busy_fraction =
            (busy.saturating_sub(self.busy_at_start).as_secs_f64() / wall.as_secs_f64()).min(1.0);
        let p99 = self.p99();
        let sync_share = if self.round_time.is_zero() {
            0.0
        } else {
            self.sync_time.as_secs_f64() / self.round_time.as_secs_f64()
        };
        let flush_bound = sync_share >= SYNC_SHARE;
        self.interval = if p99 > self.target {
            halve(self.interval)
        } else if flush_bound && busy_fraction >= BUSY_HIGH {
            if p99.as_secs_f64() < HEADROOM * self.target.as_secs_f64() {
                (self.interval + STEP).min(self.interval_max())
            } else {
                self.interval
            }
        } else if flush_bound && busy_fraction >= BUSY_LOW {
            self.interval
        } else {
            halve(self.interval)
        };
        self.period_start = now;
        self.busy_at_start = busy;
        self.waits_us.clear();
        self.round_time = Duration::ZERO;
        self.sync_time = Duration::ZERO;
        Some(Decision {
            p99,
            busy: busy_fraction,
            sync_share,
            interval: self.interval,
        })
    }

    fn p99(&mut self) -> Duration {
        if self.waits_us.is_empty() {
            return Duration::ZERO;
        }
        let rank = (self.waits_us.len() * 99).div_ceil(100) - 1;
        let (_, p99, _) = self.waits_us.select_nth_unstable(rank);
        Duration::from_micros(u64::from(*p99))
    }
}

fn halve(interval: Duration) -> Duration {
    let half = interval / 2;
    if half < STEP {
        Duration::ZERO
    } else {
        half
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A controller and the mock clocks it is driven by: wall time and reactor time.
    struct Driven {
        c: FlushController,
        now: Instant,
        run: Duration,
    }

    impl Driven {
        fn new(target: Duration) -> Driven {
            let now = Instant::now();
            Driven {
                c: FlushController::new(target, now, Duration::ZERO),
                now,
                run: Duration::ZERO,
            }
        }

        /// Runs `periods` periods of 100 rounds like `sample`, the reactor `busy` for
        /// that share of each; returns the decisions.
        fn drive(&mut self, periods: u32, busy: f64, sample: RoundSample) -> Vec<Decision> {
            let mut out = Vec::new();
            for _ in 0..periods {
                for _ in 0..100 {
                    self.c.record(sample);
                }
                self.now += PERIOD;
                self.run += PERIOD.mul_f64(busy);
                let run = self.run;
                out.push(self.c.tick(self.now, || run).expect("period over"));
            }
            out
        }
    }

    /// A 400 µs round whose fdatasync took `sync_us` and whose commit wait was `wait`.
    fn round(wait: Duration, sync_us: u64) -> RoundSample {
        RoundSample {
            commit_wait: wait,
            round: Duration::from_micros(400),
            sync: Duration::from_micros(sync_us),
        }
    }

    fn device_bound(wait: Duration) -> RoundSample {
        round(wait, 300)
    }

    #[test]
    fn a_saturated_device_bound_shard_batches_more_up_to_its_headroom() {
        let mut d = Driven::new(4 * MS);
        let max = d.c.interval_max();
        let out = d.drive(200, 0.97, device_bound(MS));
        assert!(
            out[0].interval == STEP && out[1].interval == 2 * STEP,
            "{out:?}"
        );
        assert_eq!(
            out.last().expect("decided").interval,
            max,
            "bounded by target/2"
        );
        // The waits approach the target: growth stops below it, and above it halves.
        let out = d.drive(1, 0.97, device_bound(3 * MS));
        assert_eq!(out[0].interval, max, "holds inside the headroom");
        let out = d.drive(1, 0.97, device_bound(5 * MS));
        assert_eq!(out[0].interval, max / 2, "over the target: halves");
    }

    #[test]
    fn spare_cpu_and_an_idle_device_bring_the_interval_back_to_zero() {
        let mut d = Driven::new(4 * MS);
        d.drive(40, 0.97, device_bound(MS));
        assert!(d.c.interval() > Duration::ZERO);
        let idle_device = round(MS, 50);
        let out = d.drive(10, 0.5, idle_device);
        assert_eq!(
            out.last().expect("decided").interval,
            Duration::ZERO,
            "{out:?}"
        );
        d.drive(40, 0.97, device_bound(MS));
        let cpu_bound = round(MS, 40);
        let out = d.drive(10, 0.99, cpu_bound);
        assert_eq!(
            out.last().expect("decided").interval,
            Duration::ZERO,
            "CPU-bound rounds gain nothing from waiting"
        );
    }

    #[test]
    fn a_device_busy_flushing_with_cpu_to_spare_keeps_rounds_back_to_back() {
        let mut d = Driven::new(4 * MS);
        let out = d.drive(8, 0.3, device_bound(MS));
        assert!(
            out.iter().all(|o| o.interval == Duration::ZERO),
            "pipelined rounds batch by themselves: {out:?}"
        );
        assert!(out[0].sync_share >= SYNC_SHARE);
        // A flush-bound shard between the busy thresholds holds what it has.
        d.drive(40, 0.97, device_bound(MS));
        let held = d.c.interval();
        assert!(held > Duration::ZERO);
        let out = d.drive(5, 0.8, device_bound(MS));
        assert!(out.iter().all(|o| o.interval == held), "{out:?}");
    }

    #[test]
    fn p99_counts_the_slowest_percent() {
        let start = Instant::now();
        let mut c = FlushController::new(4 * MS, start, Duration::ZERO);
        for i in 0..1000u64 {
            c.record(RoundSample {
                commit_wait: Duration::from_micros(if i < 985 { 100 } else { 9000 }),
                round: Duration::ZERO,
                sync: Duration::ZERO,
            });
        }
        let d = c.tick(start + PERIOD, || Duration::ZERO).expect("decided");
        assert_eq!(d.p99, Duration::from_micros(9000));
        assert!(
            c.tick(start + PERIOD + MS, || Duration::ZERO).is_none(),
            "a new period runs"
        );
    }
}
