//! The `loadgen` binary for tests that drive the real broker with it: where it is, and
//! running it with its exit status checked. `tests/run-all.sh` builds it
//! (`cargo build -p loadgen`) before the tests; a release test run uses
//! `target/release/loadgen` (`cargo build --release -p loadgen`).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

use base64::Engine;
use hdrhistogram::{
    serialization::{
        interval_log::{IntervalLogIterator, LogEntry},
        Deserializer,
    },
    Histogram,
};

use super::broker::Broker;

/// The loadgen binary of the same profile as this test binary; panics if it is missing.
pub fn loadgen() -> PathBuf {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(profile)
        .join("loadgen");
    assert!(
        path.exists(),
        "{} is missing: `cargo build -p loadgen` (tests/run-all.sh does)",
        path.display()
    );
    path
}

/// Runs loadgen with `args` and returns its output, failing with it and the broker's log
/// if it does not exit with `code`.
pub fn run_loadgen(args: &[&str], broker: &Broker, code: i32) -> Output {
    let out = Command::new("timeout")
        .arg("1200")
        .arg(loadgen())
        .args(args)
        .output()
        .expect("run loadgen");
    assert_eq!(
        out.status.code(),
        Some(code),
        "loadgen {args:?}:\n{}\n{}\nbroker log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        broker.log()
    );
    out
}

/// The intervals of an `.hlog` file: each one's start (from the log's start time) and
/// its histogram (nanoseconds), decoded with HdrHistogram's own deserializer.
pub fn hlog_intervals(path: &Path) -> Vec<(Duration, Histogram<u64>)> {
    let bytes = std::fs::read(path).expect("hlog");
    let mut deserializer = Deserializer::new();
    let mut out = Vec::new();
    for entry in IntervalLogIterator::new(&bytes) {
        if let LogEntry::Interval(interval) = entry.expect("hlog parses") {
            let encoded = base64::engine::general_purpose::STANDARD
                .decode(interval.encoded_histogram())
                .expect("base64");
            let histogram: Histogram<u64> = deserializer
                .deserialize(&mut encoded.as_slice())
                .expect("histogram decodes");
            out.push((interval.start_timestamp(), histogram));
        }
    }
    out
}

/// A run's `summary.json`.
pub fn summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("summary.json is JSON")
}
