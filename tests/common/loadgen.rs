//! The `loadgen` binary for tests that drive the real broker with it: where it is, and
//! running it with its exit status checked. `tests/run-all.sh` builds it
//! (`cargo build -p loadgen`) before the tests; a release test run uses
//! `target/release/loadgen` (`cargo build --release -p loadgen`).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
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

/// A run's `summary.json`.
pub fn summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("summary.json is JSON")
}
