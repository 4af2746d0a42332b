//! What one core measured: latency histograms and counters, handed to the reporter once
//! per interval.
//!
//! Each core records into its own [`CoreStats`] (`Rc<RefCell<_>>`, no locks); once per
//! second its reporter task takes the interval's histograms and counters and sends them
//! to the main thread as an [`IntervalReport`].

use hdrhistogram::Histogram;

/// Highest latency a histogram holds: one hour, in nanoseconds.
pub const LATENCY_NS_MAX: u64 = 3_600_000_000_000;
/// Smallest latency a histogram tells apart: one microsecond. Values stay in
/// nanoseconds, but a microsecond floor makes each histogram ~100 KiB instead of
/// ~500 KiB, which matters because one is taken, sent and merged per core per second.
pub const LATENCY_NS_RESOLUTION: u64 = 1_000;
/// Significant decimal digits kept by every histogram.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A latency loadgen measures; each gets its own `.hlog` and `.hgrm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Metric {
    /// From a message's (scheduled) send time to its acknowledgement.
    Produce,
    /// From a message's (scheduled) send time to its receipt by a consumer.
    EndToEnd,
    /// From a fetch request's send to its response.
    Fetch,
    /// From a transaction's EndTxn request to its answer (commit or abort).
    Commit,
    /// From a transaction's AddPartitionsToTxn request (which opens it) to its answer.
    Begin,
}

/// How many metrics there are.
pub const METRIC_COUNT: usize = 5;

impl Metric {
    /// The name used for files and in summary.json.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Produce => "produce",
            Metric::EndToEnd => "e2e",
            Metric::Fetch => "fetch",
            Metric::Commit => "commit",
            Metric::Begin => "begin",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A fresh latency histogram (nanoseconds, 1 µs to one hour, 3 significant digits).
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LATENCY_NS_RESOLUTION, LATENCY_NS_MAX, SIGNIFICANT_DIGITS)
        .unwrap_or_else(|e| unreachable!("constant histogram bounds are valid: {e}"))
}

/// Counts of one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages acknowledged (or written, with acks=0).
    pub produced_messages: u64,
    /// Value bytes of those messages.
    pub produced_bytes: u64,
    /// Messages received by consumers.
    pub consumed_messages: u64,
    /// Value bytes received by consumers (record batch bytes).
    pub consumed_bytes: u64,
    /// Messages or requests that failed.
    pub errors: u64,
}

impl Counters {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Counters) {
        self.produced_messages += other.produced_messages;
        self.produced_bytes += other.produced_bytes;
        self.consumed_messages += other.consumed_messages;
        self.consumed_bytes += other.consumed_bytes;
        self.errors += other.errors;
    }
}

/// One core's measurements of the current interval.
pub struct CoreStats {
    histograms: [Histogram<u64>; METRIC_COUNT],
    /// The interval's counts so far.
    pub counters: Counters,
}

impl Default for CoreStats {
    fn default() -> Self {
        CoreStats {
            histograms: std::array::from_fn(|_| latency_histogram()),
            counters: Counters::default(),
        }
    }
}

impl CoreStats {
    /// Records one latency; values beyond an hour are clamped to an hour.
    pub fn record(&mut self, metric: Metric, latency_ns: u64) {
        self.histograms[metric.index()].saturating_record(latency_ns.max(1));
    }

    /// Takes the interval's histograms and counters, leaving empty ones.
    pub fn take(&mut self) -> ([Histogram<u64>; METRIC_COUNT], Counters) {
        let histograms = std::mem::replace(
            &mut self.histograms,
            std::array::from_fn(|_| latency_histogram()),
        );
        (histograms, std::mem::take(&mut self.counters))
    }
}

/// One core's interval, sent to the main thread.
pub struct IntervalReport {
    /// The interval's number: it ends `tick` seconds after the run's start (the last one
    /// may be shorter).
    pub tick: u64,
    /// When the interval ended, on the process clock.
    pub end_ns: u64,
    /// Latency histograms, indexed by metric (produce, e2e, fetch, commit, begin).
    pub histograms: [Histogram<u64>; METRIC_COUNT],
    /// The interval's counts.
    pub counters: Counters,
    /// Whether this is the core's last report.
    pub last: bool,
}

impl IntervalReport {
    /// The histogram of `metric`.
    pub fn histogram(&self, metric: Metric) -> &Histogram<u64> {
        &self.histograms[metric.index()]
    }
}
