//! Python Kafka clients against the real broker: kafka-python 3 and confluent-kafka,
//! installed into `target/pyenv` by `tests/run-all.sh` at pinned versions.

#[allow(dead_code)]
mod common;

use std::{process::Command, time::Duration};

use common::{
    broker::{free_port, http_exchange, Broker},
    interop::{python, run_script, script, spawn_script},
    scratch_dir,
};

/// Runs `script` from tests/interop against `broker` with its bootstrap and `topic`.
fn run_script_with_topic(broker: &Broker, script: &str, topic: &str) {
    run_script(script, broker, &[broker.bootstrap(), topic.into()]);
}

#[test]
fn kafka_python_produces_idempotently_and_consumes() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let args = [broker.bootstrap(), "kafka-python".into(), "2000".into()];
    run_script("kafka_python_roundtrip.py", &broker, &args);
    assert!(
        broker.data_dir.join("producer_ids").exists(),
        "the producer asked for a producer id"
    );
}

#[test]
fn confluent_kafka_produces_idempotently_and_consumes() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let args = [broker.bootstrap(), "confluent".into(), "2000".into()];
    run_script("confluent_kafka_roundtrip.py", &broker, &args);
    assert!(
        broker.data_dir.join("producer_ids").exists(),
        "the producer asked for a producer id"
    );
}

#[test]
fn confluent_kafka_transactions_commit_abort_fence_and_carry_offsets() {
    let dir = scratch_dir();
    let metrics_port = free_port();
    let listen = format!("127.0.0.1:{metrics_port}");
    let broker = Broker::start(&dir.path().join("data"), 2, &["--metrics-listen", &listen]);
    run_script_with_topic(&broker, "transactions.py", "txn");
    // The script left tx-hanging open: weir transactions finds and aborts it.
    let weir = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["transactions", "--bootstrap", &broker.bootstrap()])
            .args(args)
            .output()
            .expect("weir transactions");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "weir transactions {args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let listed = weir(&["list"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("tx-hanging\t") && l.contains("\tOngoing\t")),
        "{listed}"
    );
    assert!(listed.contains("tx-1\t"), "{listed}");
    let described = weir(&["describe", "tx-hanging"]);
    assert!(
        described.contains("Ongoing") && described.contains("txn-0"),
        "{described}"
    );
    // The open transaction holds back read_committed readers of the partitions it
    // wrote to (3 records, on partitions 0-2 of "txn"), until it is aborted.
    let held = |scrape: &str| -> f64 {
        scrape
            .lines()
            .filter(|l| {
                l.starts_with("weir_partition_last_stable_offset_lag{")
                    && l.contains("topic=\"txn\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let scrape = || {
        http_exchange(
            &listen,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
            Duration::from_secs(5),
        )
        .expect("scrape the metrics endpoint")
    };
    let until = |what: &str, ok: &dyn Fn(f64) -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let lag = held(&scrape());
            if ok(lag) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: last stable offset lags of txn sum to {lag}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    until("the open transaction holds its 3 records", &|lag| {
        lag >= 3.0
    });
    weir(&["abort", "tx-hanging"]);
    until("nothing is held once it is aborted", &|lag| lag == 0.0);
    let described = weir(&["describe", "tx-hanging"]);
    assert!(
        described.contains("CompleteAbort") || described.contains("Empty"),
        "{described}"
    );
    let metrics = scrape();
    for series in [
        "weir_transactions_committed_total",
        "weir_transactions_aborted_total",
    ] {
        let total: f64 = metrics
            .lines()
            .filter(|l| l.starts_with(series))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        assert!(total >= 2.0, "{series} counted the transactions: {total}");
    }
}

#[test]
fn offsets_for_times_finds_the_exact_record_inside_batches_of_every_codec() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    assert_eq!(common::kafka_client::create(broker.port, "times", 5), 0);
    run_script_with_topic(&broker, "offsets_for_times.py", "times");
}

#[test]
fn partitions_added_are_picked_up_by_a_running_producer_and_group() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    run_script_with_topic(&broker, "create_partitions.py", "growing");
}

#[test]
fn a_groups_offsets_are_deleted_only_when_no_member_consumes_the_topic() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    run_script_with_topic(&broker, "offset_delete.py", "offsets-going");
}

#[test]
fn deleted_records_are_gone_for_consumers_and_stay_gone_after_a_crash() {
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let bootstrap = broker.bootstrap();
    let args = |phase: &str| [bootstrap.clone(), "trimmed".into(), phase.into()];
    run_script("delete_records.py", &broker, &args("produce"));
    broker.crash_and_restart();
    run_script("delete_records.py", &broker, &args("check"));
}

#[test]
fn a_log_append_time_topic_stamps_records_with_the_brokers_time() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    run_script_with_topic(&broker, "log_append_time.py", "stamped");
}

#[test]
fn confluent_kafka_edge_cases_round_trip() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    run_script(
        "confluent_kafka_edge_cases.py",
        &broker,
        &[broker.bootstrap(), "edges".into()],
    );
}

#[test]
fn acknowledged_messages_survive_kill_9_while_confluent_kafka_produces() {
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("data"), 2, &["--default-partitions", "4"]);
    let acked = dir.path().join("acked.txt");
    let mut producer = Command::new("timeout")
        .arg("180")
        .arg(python())
        .arg(script("confluent_kafka_crash.py"))
        .args(["produce", &broker.bootstrap(), "crash", "60000"])
        .arg(&acked)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("producer");
    for _ in 0..3 {
        std::thread::sleep(std::time::Duration::from_millis(700));
        broker.crash_and_restart();
    }
    let status = producer.wait().expect("producer");
    assert!(
        status.success(),
        "producer failed; broker log:\n{}",
        broker.log()
    );
    let acked_count = std::fs::read_to_string(&acked)
        .expect("acked")
        .lines()
        .count();
    assert!(
        acked_count > 1000,
        "the producer got acknowledgements ({acked_count})"
    );
    let args = [
        "check".into(),
        broker.bootstrap(),
        "crash".into(),
        acked.display().to_string(),
    ];
    run_script("confluent_kafka_crash.py", &broker, &args);
}

#[test]
fn confluent_kafka_groups_split_partitions_take_over_and_resume() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    run_script(
        "groups_confluent.py",
        &broker,
        &[broker.bootstrap(), "grouped".into(), "400".into()],
    );
}

#[test]
fn kafka_python_group_resumes_from_committed_offsets() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    run_script(
        "groups_kafka_python.py",
        &broker,
        &[broker.bootstrap(), "py-grouped".into(), "300".into()],
    );
}

#[test]
fn committed_offsets_survive_a_crash_and_groups_can_be_listed_described_and_deleted() {
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("data"), 2, &["--default-partitions", "3"]);
    let keys = dir.path().join("keys.txt").display().to_string();
    let args = |phase: &str, b: &Broker| {
        [
            phase.into(),
            b.bootstrap(),
            "restarted".into(),
            "300".into(),
            keys.clone(),
        ]
    };
    run_script("groups_restart.py", &broker, &args("first", &broker));
    broker.crash_and_restart();
    run_script("groups_restart.py", &broker, &args("second", &broker));
}

#[test]
fn fifty_members_churn_into_a_stable_group_and_a_killed_member_is_replaced() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let args = [
        broker.bootstrap(),
        "churn".into(),
        "50".into(),
        "64".into(),
        "3".into(),
    ];
    run_script("groups_churn.py", &broker, &args);
}

#[test]
fn a_restarted_static_member_gets_its_partitions_back_without_a_rebalance() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    run_script(
        "groups_static.py",
        &broker,
        &[broker.bootstrap(), "static-topic".into()],
    );
}

#[test]
fn twenty_kill_9s_under_a_producer_and_a_consumer_group_lose_nothing_acknowledged_or_consumed() {
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("data"), 2, &["--default-partitions", "4"]);
    let file = |name: &str| dir.path().join(name).display().to_string();
    let (stop, acked, commits, seen) = (
        file("stop"),
        file("acked.txt"),
        file("commits.txt"),
        file("seen.txt"),
    );
    let spawn = |args: &[&str]| spawn_script("kill_loop.py", args, 300);
    let bootstrap = broker.bootstrap();
    let mut producer = spawn(&["produce", &bootstrap, "survive", &stop, &acked]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut consumer = spawn(&["consume", &bootstrap, "survive", &stop, &commits, &seen]);
    // A fixed seed: the kill times are part of the test's identity.
    let mut seed = 0x5eed_u64;
    for kill in 0..20 {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let pause = 150 + (seed >> 33) % 500;
        std::thread::sleep(std::time::Duration::from_millis(pause));
        broker.crash_and_restart();
        eprintln!("kill {kill} after {pause} ms");
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    std::fs::write(&stop, b"").expect("stop");
    assert!(
        producer.wait().expect("producer").success(),
        "producer failed; log:\n{}",
        broker.log()
    );
    assert!(
        consumer.wait().expect("consumer").success(),
        "consumer failed; log:\n{}",
        broker.log()
    );
    run_script(
        "kill_loop.py",
        &broker,
        &[
            "check".into(),
            broker.bootstrap(),
            "survive".into(),
            acked.clone(),
            commits.clone(),
            seen.clone(),
        ],
    );
}

/// The arguments of `compaction.py` for `phase`, its state in `state`.
fn compaction_args(b: &Broker, phase: &str, state: &std::path::Path) -> [String; 4] {
    [
        b.bootstrap(),
        "compacted".into(),
        phase.into(),
        state.display().to_string(),
    ]
}

#[test]
fn a_compacted_topic_keeps_the_newest_record_of_each_key_through_a_crash() {
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let state = dir.path().join("compaction.json");
    for phase in ["fill", "wait"] {
        run_script(
            "compaction.py",
            &broker,
            &compaction_args(&broker, phase, &state),
        );
    }
    broker.crash_and_restart();
    run_script(
        "compaction.py",
        &broker,
        &compaction_args(&broker, "check", &state),
    );
}

#[test]
fn kill_9_at_random_points_of_compaction_passes_loses_nothing_the_policy_keeps() {
    let dir = scratch_dir();
    // Paced to 1 MiB/s, a pass over the topic's ~3.5 MB takes about 8 s.
    let mut broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--compaction-rate", "1048576"],
    );
    let state = dir.path().join("compaction.json");
    let mut fill = compaction_args(&broker, "fill", &state).to_vec();
    fill.push("delete".into());
    run_script("compaction.py", &broker, &fill);
    // Every pass starts on the whole topic now, so each kill lands inside one.
    let altered = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "topics",
            "alter-config",
            "compacted",
            "cleanup.policy=compact",
        ])
        .args(["--bootstrap", &broker.bootstrap()])
        .status()
        .expect("run weir");
    assert!(altered.success());
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut rng = common::rng::Rng(seed);
    for kill in 0..3 {
        // Its key map takes ~3.5 s, then segments are rewritten and swapped one by one.
        let after = std::time::Duration::from_millis(2_000 + rng.below(6_000));
        std::thread::sleep(after);
        eprintln!("seed {seed}: kill -9 number {kill} after {after:?}");
        broker.crash_and_restart();
        run_script(
            "compaction.py",
            &broker,
            &compaction_args(&broker, "consistent", &state),
        );
    }
    run_script(
        "compaction.py",
        &broker,
        &compaction_args(&broker, "wait", &state),
    );
    broker.crash_and_restart();
    run_script(
        "compaction.py",
        &broker,
        &compaction_args(&broker, "check", &state),
    );
}
