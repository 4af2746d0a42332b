//! A topic's partitions as the cluster reports them (`weir topics describe`, `kcat -L`),
//! and waiting for them to reach a state: shared by the replication tests and the fault
//! campaign.

use std::time::{Duration, Instant};

use super::{cluster::run_weir, kcat};

/// One partition as `weir topics describe` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Its leader's node id, -1 if none.
    pub leader: i64,
    /// Its leader epoch.
    pub epoch: i64,
    /// Its replicas' node ids.
    pub replicas: Vec<i64>,
    /// Its in-sync replicas' node ids.
    pub isr: Vec<i64>,
    /// Its high watermark, -1 if unknown.
    pub high_watermark: i64,
}

/// `weir topics describe`, or nothing while it fails (a leader just died).
pub fn describe(bootstrap: &str, topic: &str) -> Vec<Row> {
    let (ok, out) = run_weir(&["topics", "--bootstrap", bootstrap, "describe", topic]);
    if !ok {
        return Vec::new();
    }
    let nodes = |s: &str| -> Vec<i64> { s.split(',').filter_map(|n| n.parse().ok()).collect() };
    out.lines()
        .skip(2)
        .take_while(|l| !l.starts_with("CONFIG"))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Row {
                leader: f[1].parse().unwrap_or(-1),
                epoch: f[2].parse().expect("epoch"),
                replicas: nodes(f[3]),
                isr: nodes(f[4]),
                high_watermark: f[6].parse().unwrap_or(-1),
            }
        })
        .collect()
}

/// The leader node of every partition of `topic`, from `kcat -L` (Metadata only).
pub fn leaders(bootstrap: &str, topic: &str) -> Vec<i64> {
    kcat(&["-b", bootstrap, "-L", "-t", topic], None)
        .lines()
        .filter_map(|l| l.split("leader ").nth(1))
        .filter_map(|l| l.split(',').next()?.trim().parse().ok())
        .collect()
}

/// Waits until Metadata through `via` shows every partition of `topic` led, and none by
/// host `host` (Metadata only: `describe` would ask a stopped or cut-off host for
/// offsets); panics with `what` after 15 s.
pub fn wait_led_elsewhere(via: &str, topic: &str, host: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while leaders(via, topic)
        .iter()
        .any(|l| *l < 0 || l / 1024 == i64::from(host))
    {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Polls `describe` until `done` holds for every partition; panics after `within`.
pub fn wait_for(
    bootstrap: &str,
    topic: &str,
    within: Duration,
    what: &str,
    done: impl Fn(&Row) -> bool,
) -> Vec<Row> {
    let deadline = Instant::now() + within;
    loop {
        let rows = describe(bootstrap, topic);
        if !rows.is_empty() && rows.iter().all(&done) {
            return rows;
        }
        assert!(Instant::now() < deadline, "{what}: {rows:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
