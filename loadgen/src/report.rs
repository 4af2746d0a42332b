//! The main thread's side of a run: merges the cores' interval reports, prints one
//! progress line per second, appends each interval to the HdrHistogram interval logs
//! (`<metric>.hlog`), and keeps the totals of the measured (post-warm-up) intervals.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{IsTerminal, Write},
    path::Path,
    sync::mpsc::Receiver,
    time::{Duration, SystemTime},
};

use hdrhistogram::{
    serialization::{
        interval_log::{IntervalLogWriterBuilder, Tag},
        V2DeflateSerializer,
    },
    Histogram,
};

use crate::stats::{latency_histogram, Counters, IntervalReport, Metric};

/// A report as sent by a core: which core, and what it measured.
pub type CoreReport = (usize, IntervalReport);

/// The merged measurements of the measured part of the run.
pub struct Totals {
    /// Latency histograms of the measured intervals, by metric.
    pub histograms: BTreeMap<Metric, Histogram<u64>>,
    /// Counts of the measured intervals.
    pub counters: Counters,
    /// Counts of the whole run, warm-up included.
    pub counters_all: Counters,
    /// Length of the measured intervals, in seconds.
    pub measured_seconds: f64,
}

struct Bucket {
    reports: usize,
    end_ns: u64,
    histograms: BTreeMap<Metric, Histogram<u64>>,
    counters: Counters,
}

/// Receives reports from `cores` cores until each has sent its last, writing the interval
/// logs of `metrics` into `out` and printing progress. Intervals that start before
/// `warmup` are logged but left out of the totals.
pub fn collect(
    reports: Receiver<CoreReport>,
    cores: usize,
    metrics: &[Metric],
    out: &Path,
    start_ns: u64,
    warmup: Duration,
    started_at: SystemTime,
) -> std::io::Result<Totals> {
    let mut files = metrics
        .iter()
        .map(|m| File::create(out.join(format!("{}.hlog", m.name()))))
        .collect::<std::io::Result<Vec<File>>>()?;
    let mut serializers: Vec<V2DeflateSerializer> =
        metrics.iter().map(|_| V2DeflateSerializer::new()).collect();
    let mut logs = Vec::new();
    for (file, serializer) in files.iter_mut().zip(serializers.iter_mut()) {
        let log = IntervalLogWriterBuilder::new()
            .add_comment("loadgen latency log; values in nanoseconds, max column in milliseconds")
            .with_start_time(started_at)
            .with_base_time(started_at)
            .with_max_value_divisor(1e6)
            .begin_log_with(file, serializer)?;
        logs.push(log);
    }

    let terminal = std::io::stderr().is_terminal();
    let mut totals = Totals {
        histograms: metrics.iter().map(|&m| (m, latency_histogram())).collect(),
        counters: Counters::default(),
        counters_all: Counters::default(),
        measured_seconds: 0.0,
    };
    let mut buckets: BTreeMap<u64, Bucket> = BTreeMap::new();
    let mut latest: Vec<Option<u64>> = vec![None; cores];
    let mut finished = vec![false; cores];
    let mut flushed_ns = start_ns;
    let warmup_ns = warmup.as_nanos() as u64;

    while finished.iter().any(|f| !f) {
        let Ok((core, report)) = reports.recv() else {
            break;
        };
        latest[core] = Some(report.tick);
        finished[core] |= report.last;
        let bucket = buckets.entry(report.tick).or_insert_with(|| Bucket {
            reports: 0,
            end_ns: 0,
            histograms: metrics.iter().map(|&m| (m, latency_histogram())).collect(),
            counters: Counters::default(),
        });
        bucket.reports += 1;
        bucket.end_ns = bucket.end_ns.max(report.end_ns);
        bucket.counters.add(&report.counters);
        for (metric, histogram) in bucket.histograms.iter_mut() {
            histogram
                .add(report.histogram(*metric))
                .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        }
        let complete_through = if finished.iter().all(|&f| f) {
            u64::MAX
        } else {
            latest
                .iter()
                .zip(&finished)
                .filter(|(_, f)| !**f)
                .map(|(l, _)| l.unwrap_or(0))
                .min()
                .unwrap_or(0)
        };
        while let Some(entry) = buckets.first_entry() {
            if *entry.key() > complete_through {
                break;
            }
            let bucket = entry.remove();
            let interval_start_ns = flushed_ns;
            let interval_end_ns = bucket.end_ns.max(interval_start_ns);
            flushed_ns = interval_end_ns;
            let length = Duration::from_nanos(interval_end_ns - interval_start_ns);
            let offset = Duration::from_nanos(interval_start_ns - start_ns);
            for (log, metric) in logs.iter_mut().zip(metrics) {
                log.write_histogram(
                    &bucket.histograms[metric],
                    offset,
                    length,
                    Tag::new(metric.name()),
                )
                .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
            }
            totals.counters_all.add(&bucket.counters);
            if interval_start_ns - start_ns >= warmup_ns {
                totals.counters.add(&bucket.counters);
                totals.measured_seconds += length.as_secs_f64();
                for (metric, histogram) in &bucket.histograms {
                    if let Some(total) = totals.histograms.get_mut(metric) {
                        total
                            .add(histogram)
                            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
                    }
                }
            }
            print_progress(
                terminal,
                offset + length,
                length,
                &bucket,
                metrics,
                &totals.counters_all,
            );
        }
    }
    if terminal {
        eprintln!();
    }
    Ok(totals)
}

fn print_progress(
    terminal: bool,
    elapsed: Duration,
    length: Duration,
    bucket: &Bucket,
    metrics: &[Metric],
    all: &Counters,
) {
    let seconds = length.as_secs_f64().max(1e-9);
    let c = &bucket.counters;
    let mut line = format!("[{:>6.1}s]", elapsed.as_secs_f64());
    if c.produced_messages > 0 || metrics.contains(&Metric::Produce) {
        line += &format!(
            " produced {:>9.0} msg/s {:>8.1} MB/s",
            c.produced_messages as f64 / seconds,
            c.produced_bytes as f64 / 1e6 / seconds
        );
    }
    if metrics.contains(&Metric::Fetch) {
        line += &format!(
            " consumed {:>9.0} msg/s {:>8.1} MB/s",
            c.consumed_messages as f64 / seconds,
            c.consumed_bytes as f64 / 1e6 / seconds
        );
    }
    for (metric, histogram) in &bucket.histograms {
        if *metric != Metric::Fetch || metrics.len() == 1 {
            line += &format!(
                " | {} p50 {:.3} p99 {:.3} ms",
                metric.name(),
                histogram.value_at_quantile(0.5) as f64 / 1e6,
                histogram.value_at_quantile(0.99) as f64 / 1e6
            );
        }
    }
    line += &format!(" | errors {}", all.errors);
    let mut stderr = std::io::stderr().lock();
    if terminal {
        let _ = write!(stderr, "\r\x1b[2K{line}");
    } else {
        let _ = writeln!(stderr, "{line}");
    }
    let _ = stderr.flush();
}
