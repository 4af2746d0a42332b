//! Kafka's `kafka-reassign-partitions.sh` (org.apache.kafka.tools.reassign.
//! ReassignPartitionsCommand from kafka-tools 4.4.0) against three weir hosts: a
//! partition moves to another host and another gains a replica, `--verify` reports both
//! completed (clearing the throttle it set) and every record is still there,
//! read from the new leaders; a move that cannot finish (its new replica's host cut off
//! from the leader's) is listed with its adding replica and cancelled, giving the
//! partition back its replicas.

#[allow(dead_code)]
mod common;

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use common::{
    cluster::{create_topic, Cluster},
    jvm::run_kafka_tool,
    kcat,
    netns::Network,
    partitions::{describe, wait_for, Row},
};

/// Runs the tool through `bootstrap` with `args`; returns its exit success and output.
fn reassign(bootstrap: &str, args: &[&str]) -> (bool, String) {
    run_kafka_tool(
        "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
        bootstrap,
        args,
    )
}

/// Writes the tool's reassignment file moving `topic`'s partitions to `targets`.
fn plan(dir: &Path, topic: &str, targets: &[(u32, Vec<i64>)]) -> String {
    let partitions: Vec<serde_json::Value> = targets
        .iter()
        .map(|(p, replicas)| serde_json::json!({"topic": topic, "partition": p, "replicas": replicas}))
        .collect();
    let path = dir.join(format!("{topic}.json"));
    let plan = serde_json::json!({"version": 1, "partitions": partitions});
    std::fs::write(&path, plan.to_string()).expect("write the plan");
    path.display().to_string()
}

/// A host's node id (one shard each) other than those in `taken`.
fn other_than(taken: &[i64]) -> i64 {
    [1024, 2048, 3072]
        .into_iter()
        .find(|n| !taken.contains(n))
        .expect("a free host")
}

/// Three hosts of one shard each, with `topic` (`partitions`, one replica each)
/// created and led: the cluster, host 1's bootstrap and the partitions.
fn three_hosts_with(topic: &str, partitions: u32) -> (Cluster, String, Vec<Row>) {
    let mut cluster = Cluster::start(3, 1);
    cluster.converged_metadata(Duration::from_secs(15));
    let b1 = cluster.host(1).bootstrap();
    create_topic(&b1, topic, partitions, 1);
    let rows = wait_for(&b1, topic, Duration::from_secs(15), "led", |r| {
        r.leader >= 0
    });
    (cluster, b1, rows)
}

/// Runs `--verify` of `file` every `every` until it reports each of `partitions` (as
/// `topic-p`) completed, for at most a minute; its last output.
fn verify_until_completed(
    bootstrap: &str,
    file: &str,
    partitions: &[&str],
    every: Duration,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (ok, out) = reassign(bootstrap, &["--verify", "--reassignment-json-file", file]);
        assert!(ok, "{out}");
        let completed =
            |p: &&str| out.contains(&format!("Reassignment of partition {p} is completed"));
        if partitions.iter().all(completed) {
            return out;
        }
        assert!(Instant::now() < deadline, "never completed: {out}");
        std::thread::sleep(every);
    }
}

/// `--execute` of `file` with `--throttle BYTES_PER_SECOND`.
fn execute_throttled(bootstrap: &str, file: &str, rate: &str) -> (bool, String) {
    reassign(
        bootstrap,
        &[
            "--execute",
            "--reassignment-json-file",
            file,
            "--throttle",
            rate,
        ],
    )
}

/// Every record of `topic` partition `p`, read from the start.
fn read_back(bootstrap: &str, topic: &str, p: &str) -> String {
    kcat(
        &[
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            p,
            "-o",
            "beginning",
            "-e",
        ],
        None,
    )
}

#[test]
fn partitions_move_between_hosts_and_keep_every_record() {
    let (_cluster, b1, rows) = three_hosts_with("moved", 2);
    let lines: String = (0..300).map(|i| format!("record-{i}\n")).collect();
    for p in ["0", "1"] {
        kcat(&["-b", &b1, "-P", "-t", "moved", "-p", p], Some(&lines));
    }
    // Partition 0 leaves its host; partition 1 gains a replica, which it prefers.
    let targets = vec![
        (0, vec![other_than(&rows[0].replicas)]),
        (1, vec![other_than(&rows[1].replicas), rows[1].replicas[0]]),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let file = plan(dir.path(), "moved", &targets);
    // A throttle far above what the move copies: set, then cleared by --verify.
    let (ok, out) = execute_throttled(&b1, &file, "50000000");
    assert!(ok, "{out}");
    assert!(
        out.contains("Successfully started partition reassignment"),
        "{out}"
    );
    let out = verify_until_completed(&b1, &file, &["moved-0", "moved-1"], Duration::from_secs(1));
    assert!(out.contains("Clearing broker-level throttles"), "{out}");
    let rows = describe(&b1, "moved");
    for (p, target) in &targets {
        let row = &rows[*p as usize];
        assert_eq!(&row.replicas, target, "partition {p}: {row:?}");
        let mut isr = row.isr.clone();
        isr.sort_unstable();
        let mut want = target.clone();
        want.sort_unstable();
        assert_eq!(isr, want, "partition {p} in sync: {row:?}");
        assert!(target.contains(&row.leader), "partition {p}: {row:?}");
    }
    for p in ["0", "1"] {
        let read = read_back(&b1, "moved", p);
        assert_eq!(read, lines, "partition {p} kept every record, in order");
    }
    let (ok, out) = reassign(&b1, &["--list"]);
    assert!(
        ok && out.contains("No partition reassignments found"),
        "{out}"
    );
}

#[test]
fn a_move_that_cannot_finish_is_listed_and_cancelled() {
    // Controllers alone on hosts 1-3, brokers 4 and 5, each in a namespace of its own.
    let mut cluster = Cluster::start_on(Some(Network::new(5)), 3, 1, |h| {
        h.add_flags(&["--process-roles", "controller"])
    });
    cluster.add_broker(4, 1);
    cluster.add_broker(5, 1);
    let b4 = cluster.host(4).bootstrap();
    create_topic(&b4, "stuck", 1, 1);
    let rows = wait_for(&b4, "stuck", Duration::from_secs(15), "led", |r| {
        r.leader >= 0
    });
    let from = rows[0].replicas.clone();
    let (leader, added) = if from[0] == 4096 { (4, 5) } else { (5, 4) };
    let to = i64::from(added) * 1024;
    kcat(
        &["-b", &b4, "-P", "-t", "stuck", "-p", "0"],
        Some("before\n"),
    );
    // The new replica's host cannot reach the leader's: the move stays underway.
    let network = cluster.network.as_ref().expect("a network");
    let route = |verb: &str| {
        let ok = Command::new("ip")
            .args(["-n", &network.namespace(added), "route", verb])
            .args(["blackhole", &format!("{}/32", network.ip(leader))])
            .status()
            .expect("ip route")
            .success();
        assert!(ok, "ip route {verb}");
    };
    route("add");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = plan(dir.path(), "stuck", &[(0, vec![from[0], to])]);
    let (ok, out) = reassign(&b4, &["--execute", "--reassignment-json-file", &file]);
    assert!(ok, "{out}");
    let (ok, out) = reassign(&b4, &["--list"]);
    assert!(ok, "{out}");
    let listed = format!("stuck-0: replicas: {},{to}. adding: {to}.", from[0]);
    assert!(out.contains(&listed), "{out}");
    let (ok, out) = reassign(&b4, &["--cancel", "--reassignment-json-file", &file]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Successfully cancelled partition reassignment"),
        "{out}"
    );
    let rows = describe(&b4, "stuck");
    assert_eq!(rows[0].replicas, from, "back where it was: {:?}", rows[0]);
    assert_eq!(rows[0].isr, from);
    route("del");
    kcat(
        &["-b", &b4, "-P", "-t", "stuck", "-p", "0"],
        Some("after\n"),
    );
    let read = kcat(
        &[
            "-b",
            &b4,
            "-C",
            "-t",
            "stuck",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
        ],
        None,
    );
    assert_eq!(read, "before\nafter\n");
    let (ok, out) = reassign(&b4, &["--list"]);
    assert!(
        ok && out.contains("No partition reassignments found"),
        "{out}"
    );
}

/// The broker configs `kafka-configs.sh --describe` shows for node `node`.
fn broker_configs(bootstrap: &str, node: i64) -> String {
    let (ok, out) = run_kafka_tool(
        "org.apache.kafka.tools.ConfigCommand",
        bootstrap,
        &[
            "--describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            &node.to_string(),
        ],
    );
    assert!(ok, "{out}");
    out
}

#[test]
fn a_throttled_move_copies_no_faster_than_its_rate() {
    let (_cluster, b1, rows) = three_hosts_with("heavy", 1);
    // 6 MB to copy at 1 MB/s: at least 5 s once the first second's burst is spent.
    let record = "x".repeat(1000);
    let lines: String = (0..6000).map(|i| format!("{i:06}{record}\n")).collect();
    kcat(&["-b", &b1, "-P", "-t", "heavy", "-p", "0"], Some(&lines));
    let leader = rows[0].replicas[0];
    let added = other_than(&rows[0].replicas);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = plan(dir.path(), "heavy", &[(0, vec![leader, added])]);
    let started = Instant::now();
    let (ok, out) = execute_throttled(&b1, &file, "1000000");
    assert!(ok, "{out}");
    assert!(
        broker_configs(&b1, leader).contains("leader.replication.throttled.rate=1000000"),
        "the leader's rate is set"
    );
    verify_until_completed(&b1, &file, &["heavy-0"], Duration::from_millis(500));
    let took = started.elapsed();
    eprintln!("6 MB copied under a 1 MB/s throttle in {took:?}");
    assert!(
        took >= Duration::from_secs(4),
        "the throttle held the copy back: {took:?}"
    );
    assert!(
        !broker_configs(&b1, leader).contains("throttled.rate"),
        "--verify cleared the rate"
    );
    let read = read_back(&b1, "heavy", "0");
    assert_eq!(read, lines, "every record, in order");
    let row = &describe(&b1, "heavy")[0];
    assert_eq!(row.isr.len(), 2, "the new replica is in sync: {row:?}");
}
