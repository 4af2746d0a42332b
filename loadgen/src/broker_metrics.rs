//! `--broker-metrics URL`: the broker's own view of the run, beside the client's. loadgen
//! scrapes the broker's Prometheus endpoint (weir's `/metrics`) when the warm-up ends
//! and again when the run ends, and turns the difference of its group-commit histograms
//! — `weir_flush_round_seconds` (writes + fdatasync, what every acknowledgement in a
//! round waited for) and `weir_flush_sync_seconds` — into `broker-flush-round.hgrm` and
//! `broker-flush-sync.hgrm` in the run directory, with their summaries in summary.json.
//! `loadgen compare --metric broker-flush-round` then plots them like any other metric,
//! so a client latency tail can be set against the broker's rounds.
//!
//! The broker's histograms have buckets, not HdrHistogram's precision: a percentile is
//! reported as the upper bound of the bucket it falls in (weir's buckets double from
//! 10 µs), and the maximum as the upper bound of the highest non-empty bucket.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    io::{Read, Write},
    net::TcpStream,
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::Duration,
};

use crate::results::LatencySummary;

/// The broker histograms loadgen keeps: (its name in the run, the Prometheus family).
const FAMILIES: &[(&str, &str)] = &[
    ("broker-flush-round", "weir_flush_round_seconds"),
    ("broker-flush-sync", "weir_flush_sync_seconds"),
];

/// Largest exposition read.
const EXPOSITION_BYTES_MAX: u64 = 64 << 20;

/// A bucketed histogram summed over every label set: cumulative counts by upper bound
/// (seconds), and the sum of observations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Buckets {
    /// Upper bound (seconds, `f64::INFINITY` for +Inf) → observations at or below it.
    pub cumulative: BTreeMap<OrderedBound, u64>,
    /// Sum of all observations, seconds.
    pub sum: f64,
}

/// A bucket bound that sorts (bounds are never NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OrderedBound(pub f64);

impl Eq for OrderedBound {}

impl PartialOrd for OrderedBound {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedBound {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// GETs `url` (`http://HOST:PORT/PATH`) and returns the body.
pub fn scrape(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs are scraped"))?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream = TcpStream::connect(host).map_err(|e| format!("{url}: {e}"))?;
    let timeout = Some(Duration::from_secs(5));
    stream
        .set_read_timeout(timeout)
        .and_then(|()| stream.set_write_timeout(timeout))
        .map_err(|e| format!("{url}: {e}"))?;
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("{url}: {e}"))?;
    let mut answer = String::new();
    stream
        .take(EXPOSITION_BYTES_MAX)
        .read_to_string(&mut answer)
        .map_err(|e| format!("{url}: {e}"))?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{url}: no HTTP answer"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(format!(
            "{url}: {}",
            head.lines().next().unwrap_or("no status")
        ));
    }
    Ok(body.to_string())
}

/// The histogram `family` in a Prometheus text exposition, summed over its label sets.
pub fn buckets(exposition: &str, family: &str) -> Buckets {
    let mut out = Buckets::default();
    let bucket = format!("{family}_bucket{{");
    let sum = format!("{family}_sum");
    let sum_labelled = format!("{sum}{{");
    for line in exposition.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        if let Some(labels) = series.strip_prefix(&bucket) {
            let le = labels
                .split(',')
                .find_map(|l| l.trim_start_matches('{').strip_prefix("le=\""))
                .and_then(|l| l.split('"').next());
            let bound = match le {
                Some("+Inf") => f64::INFINITY,
                Some(le) => match le.parse() {
                    Ok(b) => b,
                    Err(_) => continue,
                },
                None => continue,
            };
            if let Ok(count) = value.parse::<f64>() {
                *out.cumulative.entry(OrderedBound(bound)).or_default() += count as u64;
            }
        } else if series == sum || series.starts_with(&sum_labelled) {
            out.sum += value.parse::<f64>().unwrap_or(0.0);
        }
    }
    out
}

impl Buckets {
    /// What was observed between `earlier` and `self`.
    pub fn since(&self, earlier: &Buckets) -> Buckets {
        Buckets {
            cumulative: self
                .cumulative
                .iter()
                .map(|(b, c)| {
                    let before = earlier.cumulative.get(b).copied().unwrap_or(0);
                    (*b, c.saturating_sub(before))
                })
                .collect(),
            sum: (self.sum - earlier.sum).max(0.0),
        }
    }

    fn count(&self) -> u64 {
        self.cumulative.values().copied().max().unwrap_or(0)
    }

    /// The upper bound (ms) of the bucket holding quantile `q`; the highest finite
    /// bound for the +Inf bucket.
    fn quantile_ms(&self, q: f64) -> f64 {
        let count = self.count();
        let rank = (q * count as f64).ceil().max(1.0) as u64;
        let finite_max = self
            .cumulative
            .keys()
            .map(|b| b.0)
            .filter(|b| b.is_finite())
            .fold(0.0, f64::max);
        self.cumulative
            .iter()
            .find(|(_, c)| **c >= rank)
            .map_or(
                finite_max,
                |(b, _)| {
                    if b.0.is_finite() {
                        b.0
                    } else {
                        finite_max
                    }
                },
            )
            * 1e3
    }

    /// The summary loadgen keeps per metric.
    pub fn summary(&self) -> LatencySummary {
        let count = self.count();
        LatencySummary {
            count,
            mean: if count == 0 {
                0.0
            } else {
                self.sum / count as f64 * 1e3
            },
            p50: self.quantile_ms(0.5),
            p90: self.quantile_ms(0.9),
            p99: self.quantile_ms(0.99),
            p99_9: self.quantile_ms(0.999),
            p99_99: self.quantile_ms(0.9999),
            max: self.quantile_ms(1.0),
        }
    }

    /// A percentile distribution in HdrHistogram's text format (milliseconds), one row
    /// per bucket bound, as `compare` reads it.
    pub fn distribution(&self) -> String {
        let count = self.count().max(1);
        let mut out = format!(
            "{:>12} {:>14} {:>10} {:>14}\n\n",
            "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
        );
        for (bound, c) in &self.cumulative {
            if !bound.0.is_finite() || *c == 0 {
                continue;
            }
            let q = *c as f64 / count as f64;
            let _ = writeln!(out, "{:12.3} {q:2.12} {c:10}", bound.0 * 1e3);
        }
        let _ = writeln!(out, "#[Total count    = {:12}]", self.count());
        let _ = writeln!(
            out,
            "#[Buckets from the broker's Prometheus histogram: values are bucket upper bounds]"
        );
        out
    }
}

/// A scrape at the end of the warm-up, taken on a thread of its own.
pub struct Scraper {
    url: String,
    baseline: Arc<Mutex<Option<Result<String, String>>>>,
    thread: JoinHandle<()>,
}

impl Scraper {
    /// Starts waiting out `warmup`, then scrapes `url`.
    pub fn start(url: String, warmup: Duration) -> Scraper {
        let baseline = Arc::new(Mutex::new(None));
        let (slot, target) = (Arc::clone(&baseline), url.clone());
        let thread = std::thread::spawn(move || {
            std::thread::sleep(warmup);
            let scraped = scrape(&target);
            if let Ok(mut s) = slot.lock() {
                *s = Some(scraped);
            }
        });
        Scraper {
            url,
            baseline,
            thread,
        }
    }

    /// Scrapes again and returns each kept histogram's observations since the baseline.
    pub fn finish(self) -> Result<Vec<(&'static str, Buckets)>, String> {
        self.thread
            .join()
            .map_err(|_| "the broker-metrics scraper panicked".to_string())?;
        let baseline = self
            .baseline
            .lock()
            .map_err(|_| "broker-metrics baseline lost".to_string())?
            .take()
            .unwrap_or_else(|| Err("no baseline scrape".into()))?;
        let end = scrape(&self.url)?;
        Ok(FAMILIES
            .iter()
            .map(|(name, family)| {
                (
                    *name,
                    buckets(&end, family).since(&buckets(&baseline, family)),
                )
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "# TYPE weir_flush_round_seconds histogram\nweir_flush_round_seconds_sum{shard=\"0\"} 0.5\nweir_flush_round_seconds_count{shard=\"0\"} 10\nweir_flush_round_seconds_bucket{le=\"0.001\",shard=\"0\"} 8\nweir_flush_round_seconds_bucket{le=\"0.002\",shard=\"0\"} 10\nweir_flush_round_seconds_bucket{le=\"+Inf\",shard=\"0\"} 10\n";
    const AFTER: &str = "weir_flush_round_seconds_sum{shard=\"0\"} 1.5\nweir_flush_round_seconds_bucket{le=\"0.001\",shard=\"0\"} 98\nweir_flush_round_seconds_bucket{le=\"0.002\",shard=\"0\"} 109\nweir_flush_round_seconds_bucket{le=\"+Inf\",shard=\"0\"} 110\nweir_flush_round_seconds_bucket{le=\"0.001\",shard=\"1\"} 0\nweir_flush_round_seconds_bucket{le=\"0.002\",shard=\"1\"} 0\nweir_flush_round_seconds_bucket{le=\"+Inf\",shard=\"1\"} 0\n";

    #[test]
    fn the_runs_rounds_are_the_difference_of_two_scrapes() {
        let family = "weir_flush_round_seconds";
        let run = buckets(AFTER, family).since(&buckets(BEFORE, family));
        assert_eq!(run.count(), 100);
        let s = run.summary();
        assert_eq!((s.p50, s.p99, s.max), (1.0, 2.0, 2.0));
        assert!((s.mean - 10.0).abs() < 1e-9, "{}", s.mean);
        let points =
            crate::results::read_percentile_distribution(&run.distribution()).expect("reads");
        assert_eq!(points, vec![(1.0, 0.9), (2.0, 0.99)]);
    }
}
