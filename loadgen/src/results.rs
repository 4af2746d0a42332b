//! What a run leaves in its output directory: the percentile distribution of each latency
//! (`<metric>.hgrm`, HdrHistogram's text format, values in milliseconds) and
//! `summary.json` (the configuration and the results), and how `compare` reads them back.

use std::{collections::BTreeMap, fmt::Write as _, path::Path};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Percentiles of one latency over the measured part of the run, in milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// 50th percentile.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// 99.99th percentile.
    pub p99_99: f64,
    /// Largest value.
    pub max: f64,
}

impl LatencySummary {
    /// Summarises a nanosecond histogram.
    pub fn of(histogram: &Histogram<u64>) -> LatencySummary {
        let ms = |ns: u64| ns as f64 / 1e6;
        LatencySummary {
            count: histogram.len(),
            mean: histogram.mean() / 1e6,
            p50: ms(histogram.value_at_quantile(0.5)),
            p90: ms(histogram.value_at_quantile(0.9)),
            p99: ms(histogram.value_at_quantile(0.99)),
            p99_9: ms(histogram.value_at_quantile(0.999)),
            p99_99: ms(histogram.value_at_quantile(0.9999)),
            max: ms(histogram.max()),
        }
    }

    /// The percentiles in table order with their names.
    pub fn columns(&self) -> [(&'static str, f64); 6] {
        [
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
            ("p99.9", self.p99_9),
            ("p99.99", self.p99_99),
            ("max", self.max),
        ]
    }
}

/// Messages moved in one direction over the measured part of the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Throughput {
    /// Messages.
    pub messages: u64,
    /// Messages per second.
    pub messages_per_second: f64,
    /// Megabytes (10^6) per second: value bytes produced, record-batch bytes consumed.
    pub megabytes_per_second: f64,
}

/// A `--group` member's part of the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GroupSummary {
    /// The group's name.
    pub name: String,
    /// The member id the coordinator gave.
    pub member_id: String,
    /// The generation joined.
    pub generation: i32,
    /// Partitions assigned to the member.
    pub partitions: Vec<i32>,
    /// Offset commits the coordinator accepted.
    pub commits: u64,
    /// Slowest commit round trip, in milliseconds.
    pub commit_ms_max: f64,
}

/// Everything `summary.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// The run's label.
    pub label: String,
    /// `produce`, `consume` or `e2e`.
    pub command: String,
    /// The broker asked first.
    pub bootstrap: String,
    /// The broker profile name given with --profile.
    pub profile: Option<String>,
    /// Every loadgen option of the run.
    pub options: serde_json::Value,
    /// Wall-clock start, seconds since the Unix epoch.
    pub started_at_unix_s: f64,
    /// Seconds measured (after the warm-up).
    pub measured_seconds: f64,
    /// Producer throughput, if the run produced.
    pub produce: Option<Throughput>,
    /// Consumer throughput, if the run consumed.
    pub consume: Option<Throughput>,
    /// Failed messages and requests (all of the run, warm-up included).
    pub errors: u64,
    /// Failures by kind.
    pub error_kinds: BTreeMap<String, u64>,
    /// Why the run ended early, if it did.
    pub aborted: Option<String>,
    /// The consumer-group membership, with `--group`.
    #[serde(default)]
    pub group: Option<GroupSummary>,
    /// Latency percentiles by metric name (`produce`, `e2e`, `fetch`), in milliseconds.
    pub latency_ms: BTreeMap<String, LatencySummary>,
}

impl Summary {
    /// Reads `summary.json` from a run directory.
    pub fn read(dir: &Path) -> Result<Summary, String> {
        let path = dir.join("summary.json");
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The throughput compared between runs: produced if the run produced, else consumed.
    pub fn headline_throughput(&self) -> Option<&Throughput> {
        self.produce.as_ref().or(self.consume.as_ref())
    }
}

/// Renders a nanosecond histogram as HdrHistogram's percentile distribution text (as the
/// Java `outputPercentileDistribution` writes it, values scaled to milliseconds), which
/// HdrHistogram's plotter reads.
pub fn percentile_distribution(histogram: &Histogram<u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    if !histogram.is_empty() {
        for step in histogram.iter_quantiles(5) {
            total += step.count_since_last_iteration();
            let quantile = step.quantile_iterated_to();
            let value = step.value_iterated_to() as f64 / 1e6;
            if quantile < 1.0 {
                let _ = writeln!(
                    out,
                    "{value:12.3} {quantile:2.12} {total:10} {:14.2}",
                    1.0 / (1.0 - quantile)
                );
            } else {
                let _ = writeln!(out, "{value:12.3} {quantile:2.12} {total:10}");
            }
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        histogram.mean() / 1e6,
        histogram.stdev() / 1e6
    );
    let _ = writeln!(
        out,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        histogram.max() as f64 / 1e6,
        histogram.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        histogram.buckets(),
        histogram.distinct_values()
    );
    out
}

/// One point of a percentile distribution: (value in ms, percentile as a fraction).
pub type DistributionPoint = (f64, f64);

/// Reads the points back from `.hgrm` text; comment and header lines are skipped.
pub fn read_percentile_distribution(text: &str) -> Result<Vec<DistributionPoint>, String> {
    let mut points = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 3 || line.starts_with('#') || fields[0] == "Value" {
            continue;
        }
        let value: f64 = fields[0]
            .parse()
            .map_err(|_| format!("bad value in `{line}`"))?;
        let quantile: f64 = fields[1]
            .parse()
            .map_err(|_| format!("bad percentile in `{line}`"))?;
        points.push((value, quantile));
    }
    if points.is_empty() {
        return Err("no percentile lines".into());
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::latency_histogram;

    #[test]
    fn distribution_round_trips_and_ends_at_the_maximum() {
        let mut histogram = latency_histogram();
        for i in 1..=10_000u64 {
            histogram.record(i * 1_000).unwrap();
        }
        let text = percentile_distribution(&histogram);
        assert!(text.contains("Total count    =        10000"));
        let points = read_percentile_distribution(&text).unwrap();
        let (last_value, last_quantile) = *points.last().unwrap();
        assert_eq!(last_quantile, 1.0);
        assert!((last_value - 10.0).abs() < 0.01, "{last_value}");
        assert!(points
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        let summary = LatencySummary::of(&histogram);
        assert!((summary.p50 - 5.0).abs() < 0.01 && (summary.p99 - 9.9).abs() < 0.01);
    }
}
