//! loadgen against the real broker: its records read back intact by kafka-python, the
//! histogram files of an e2e run re-read and checked, `compare` on two recorded runs, a
//! broker that goes away mid-run, a `--group` member's commits read by confluent-kafka, and
//! the broker's own group-commit histograms scraped beside the client's. The binary is `target/debug/loadgen`, which
//! `tests/run-all.sh` builds before the tests (see `common::loadgen`).

#[allow(dead_code)]
mod common;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::{
    broker::{free_port, Broker},
    interop::run_script,
    loadgen::{hlog_intervals, loadgen, run_loadgen, summary},
    scratch_dir,
};

/// Sums the counts of every interval in an `.hlog` file.
fn hlog_count(path: &Path) -> (u64, usize) {
    let intervals = hlog_intervals(path);
    (
        intervals.iter().map(|(_, h)| h.len()).sum(),
        intervals.len(),
    )
}

fn hgrm_total(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).expect("hgrm");
    let line = text
        .lines()
        .find(|l| l.contains("Total count"))
        .expect("hgrm footer");
    line.rsplit('=')
        .next()
        .and_then(|s| s.trim().trim_end_matches(']').trim().parse().ok())
        .expect("total count")
}

#[test]
fn kafka_python_reads_back_what_loadgen_produced() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let out = dir.path().join("run");
    let bootstrap = broker.bootstrap();
    run_loadgen(
        &[
            "produce",
            "--bootstrap",
            &bootstrap,
            "--topic",
            "lg",
            "--partitions",
            "3",
            "--producers",
            "2",
            "--messages",
            "5000",
            "--message-size",
            "300",
            "--batch-bytes",
            "4096",
            "--out",
            out.to_str().unwrap(),
        ],
        &broker,
        0,
    );
    let s = summary(&out);
    assert_eq!(s["produce"]["messages"], 5000, "{s}");
    assert_eq!(s["errors"], 0, "{s}");
    assert_eq!(s["latency_ms"]["produce"]["count"], 5000, "{s}");

    let args = [bootstrap, "lg".into(), "5000".into(), "300".into()];
    run_script("loadgen_check.py", &broker, &args);
}

#[test]
fn e2e_run_writes_histograms_that_read_back_and_compare_plots_them() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let bootstrap = broker.bootstrap();
    let runs: Vec<PathBuf> = ["slow", "fast"]
        .iter()
        .map(|l| dir.path().join(l))
        .collect();
    for (run, rate) in runs.iter().zip(["1000", "2000"]) {
        let label = run.file_name().unwrap().to_str().unwrap();
        run_loadgen(
            &[
                "e2e",
                "--bootstrap",
                &bootstrap,
                "--topic",
                label,
                "--partitions",
                "4",
                "--producers",
                "2",
                "--consumers",
                "2",
                "--rate",
                rate,
                "--duration",
                "3s",
                "--label",
                label,
                "--profile",
                "test",
                "--out",
                run.to_str().unwrap(),
            ],
            &broker,
            0,
        );
        let s = summary(run);
        let produced = s["produce"]["messages"].as_u64().unwrap();
        let expected = 3 * rate.parse::<u64>().unwrap();
        assert!(produced + 10 >= expected && produced <= expected, "{s}");
        assert_eq!(s["consume"]["messages"].as_u64(), Some(produced), "{s}");
        assert_eq!(s["errors"], 0, "{s}");
        assert_eq!(s["profile"], "test");
        for metric in ["produce", "e2e", "fetch"] {
            let count = s["latency_ms"][metric]["count"].as_u64().unwrap();
            let (logged, intervals) = hlog_count(&run.join(format!("{metric}.hlog")));
            assert_eq!(
                logged, count,
                "{metric}: .hlog intervals sum to the summary's count"
            );
            assert!(intervals >= 3, "{metric}: one interval per second");
            assert_eq!(hgrm_total(&run.join(format!("{metric}.hgrm"))), count);
        }
        let e2e = &s["latency_ms"]["e2e"];
        assert!(
            e2e["p50"].as_f64() <= e2e["p99"].as_f64()
                && e2e["p99"].as_f64() <= e2e["max"].as_f64()
        );
    }

    let plot = dir.path().join("plot.svg");
    let out = run_loadgen(
        &[
            "compare",
            runs[0].to_str().unwrap(),
            runs[1].to_str().unwrap(),
            "--metric",
            "e2e",
            "--plot",
            plot.to_str().unwrap(),
        ],
        &broker,
        0,
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("slow") && table.contains("fast"), "{table}");
    let fast = table
        .lines()
        .find(|l| l.starts_with("fast"))
        .expect("fast row");
    let ratio: f64 = fast
        .split_whitespace()
        .nth(2)
        .and_then(|r| {
            r.trim_start_matches('(')
                .trim_end_matches("x)")
                .parse()
                .ok()
        })
        .expect("throughput ratio");
    assert!(
        (1.6..2.4).contains(&ratio),
        "twice the rate is about twice the throughput: {table}"
    );
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
    assert!(svg.matches(',').count() > 20, "curves have points");
}

#[test]
fn broker_going_away_ends_the_run_with_the_results_so_far() {
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let out = dir.path().join("run");
    let mut child = Command::new(loadgen())
        .args([
            "produce",
            "--bootstrap",
            &broker.bootstrap(),
            "--topic",
            "gone",
            "--rate",
            "2000",
            "--duration",
            "60s",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start loadgen");
    std::thread::sleep(Duration::from_secs(2));
    broker.crash_and_restart();
    broker.stop();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "loadgen did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("run ended early"), "{stderr}");
    let s = summary(&out);
    assert!(s["aborted"].is_string(), "{s}");
    assert!(s["produce"]["messages"].as_u64().unwrap() > 1000, "{s}");
}

#[test]
fn a_group_member_commits_what_it_consumed_and_the_next_member_resumes_there() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let bootstrap = broker.bootstrap();
    let run = |args: &[&str], out: &str| {
        let out = dir.path().join(out);
        let mut all = args.to_vec();
        all.extend(["--bootstrap", &bootstrap, "--topic", "grouped"]);
        all.extend(["--out", out.to_str().unwrap()]);
        run_loadgen(&all, &broker, 0);
        summary(&out)
    };
    let e2e = run(
        &[
            "e2e",
            "--partitions",
            "3",
            "--rate",
            "2000",
            "--duration",
            "2s",
            "--group",
            "members",
            "--commit-interval",
            "200ms",
        ],
        "e2e",
    );
    let produced = e2e["produce"]["messages"].as_u64().unwrap();
    assert_eq!(e2e["consume"]["messages"].as_u64(), Some(produced), "{e2e}");
    assert_eq!(e2e["errors"], 0, "{e2e}");
    assert_eq!(e2e["group"]["partitions"], serde_json::json!([0, 1, 2]));
    assert!(e2e["group"]["commits"].as_u64().unwrap() >= 3, "{e2e}");
    let check = |group: &str| {
        run_script(
            "committed_offsets.py",
            &broker,
            &[bootstrap.clone(), group.into(), "grouped".into()],
        )
    };
    check("members");

    run(&["produce", "--messages", "500", "--rate", "0"], "more");
    let resumed = run(
        &["consume", "--duration", "2s", "--group", "members"],
        "resumed",
    );
    assert_eq!(
        resumed["consume"]["messages"].as_u64(),
        Some(500),
        "a member resumes at the group's committed offsets: {resumed}"
    );
    assert!(
        resumed["group"]["generation"].as_i64().unwrap()
            > e2e["group"]["generation"].as_i64().unwrap()
    );
    check("members");
}

#[test]
fn broker_metrics_put_the_brokers_group_commit_histograms_beside_the_clients() {
    let dir = scratch_dir();
    let metrics_port = free_port();
    let broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--metrics-listen", &format!("127.0.0.1:{metrics_port}")],
    );
    let run = dir.path().join("with-broker");
    run_loadgen(
        &[
            "produce",
            "--bootstrap",
            &broker.bootstrap(),
            "--topic",
            "scraped",
            "--partitions",
            "2",
            "--rate",
            "2000",
            "--duration",
            "2s",
            "--warmup",
            "1s",
            "--broker-metrics",
            &format!("http://127.0.0.1:{metrics_port}/metrics"),
            "--out",
            run.to_str().unwrap(),
        ],
        &broker,
        0,
    );
    let s = summary(&run);
    assert_eq!(s["errors"], 0, "{s}");
    for metric in ["broker-flush-round", "broker-flush-sync"] {
        let l = &s["latency_ms"][metric];
        let rounds = l["count"].as_u64().unwrap_or(0);
        // At 2,000 msgs/s with a 1 ms group commit, the 2 s measured hold many rounds,
        // and at most one per acknowledged batch.
        let produced = s["produce"]["messages"].as_u64().unwrap();
        assert!(rounds >= 10 && rounds <= produced, "{metric}: {l}");
        assert!(l["p99"].as_f64().unwrap() >= l["p50"].as_f64().unwrap());
        assert!(run.join(format!("{metric}.hgrm")).exists());
    }
    let out = Command::new(loadgen())
        .args([
            "compare",
            run.to_str().unwrap(),
            "--metric",
            "broker-flush-round",
        ])
        .arg("--plot")
        .arg(dir.path().join("rounds.svg"))
        .output()
        .expect("compare");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.path().join("rounds.svg").exists());
}

#[test]
fn loadgen_keys_its_messages_for_a_compacted_topic() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let bootstrap = broker.bootstrap();
    let created = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "topics",
            "create",
            "keyed",
            "--config",
            "cleanup.policy=compact",
        ])
        .args(["--bootstrap", &bootstrap])
        .status()
        .expect("run weir");
    assert!(created.success());
    let out = dir.path().join("run");
    let args = |keys: &'static [&'static str]| {
        let mut a = vec![
            "produce",
            "--bootstrap",
            &bootstrap,
            "--topic",
            "keyed",
            "--messages",
            "2000",
            "--message-size",
            "100",
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend_from_slice(keys);
        a
    };
    run_loadgen(&args(&["--keys", "50"]), &broker, 0);
    let s = summary(&out);
    assert_eq!(s["produce"]["messages"], 2000, "{s}");
    assert_eq!(s["errors"], 0, "keyed records are taken: {s}");
}

#[test]
fn transactional_producers_commit_and_abort_and_read_committed_consumers_see_commits_only() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let bootstrap = broker.bootstrap();
    // weir finalizes transaction.version 2, so loadgen speaks V2 there unless told V1.
    for (topic, v1) in [("txn-v2", false), ("txn-v1", true)] {
        let run = |name: &str, extra: &[&str]| {
            let out = dir.path().join(format!("{topic}-{name}"));
            let mut args = vec![
                extra[0],
                "--bootstrap",
                &bootstrap,
                "--topic",
                topic,
                "--partitions",
                "4",
                "--out",
                out.to_str().unwrap(),
            ];
            args.extend_from_slice(&extra[1..]);
            run_loadgen(&args, &broker, 0);
            summary(&out)
        };
        let mut produce = vec![
            "produce",
            "--producers",
            "2",
            "--messages",
            "2000",
            "--transactional",
            "--transaction-size",
            "100",
            "--abort-ratio",
            "0.5",
        ];
        if v1 {
            produce.push("--transactions-v1");
        }
        let produced = run("produce", &produce);
        assert_eq!(produced["produce"]["messages"], 2000, "{produced}");
        assert_eq!(produced["errors"], 0, "{produced}");
        // 2,000 messages in transactions of 100 per producer stream, half of them
        // aborted.
        let commits = produced["latency_ms"]["commit"]["count"].as_u64();
        assert_eq!(commits, Some(20), "one EndTxn per transaction: {produced}");
        // V1 opens each transaction with AddPartitionsToTxn; in V2 the leaders do.
        let begins = produced["latency_ms"]["begin"]["count"]
            .as_u64()
            .unwrap_or(0);
        assert_eq!(
            begins,
            if v1 { 20 } else { 0 },
            "AddPartitionsToTxn per transaction: {produced}"
        );
        let committed = run(
            "committed",
            &["consume", "--duration", "3s", "--read-committed"],
        );
        assert_eq!(committed["consume"]["messages"], 1000, "{committed}");
        let everything = run("everything", &["consume", "--duration", "3s"]);
        assert_eq!(everything["consume"]["messages"], 2000, "{everything}");
    }
}
