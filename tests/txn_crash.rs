//! Transactions through crashes at their worst moments. A broker armed with a failure
//! probe (`weir::failure_probe`) kills itself (SIGKILL) right after an EndTxn's decision
//! is durable and before any marker is sent, right after a leader made its markers
//! durable and before it answered, or right after every marker and before the
//! transaction is recorded complete. The client (confluent-kafka) dies with the broker,
//! so nobody asks again: once the broker is back, its coordinator must finish what it
//! finds by itself. A read_committed reader then sees the whole transaction after a
//! commit and none of it after an abort, no partition's last stable offset is held back,
//! and the transactional id starts its next transaction. A client that lives on retries
//! its commit through the crash until it is answered. On three hosts the coordinator's
//! host dies after the decision and stays down: another host finishes the transaction
//! it inherits.

#[allow(dead_code)]
mod common;

use std::{
    process::Child,
    time::{Duration, Instant},
};

use weir::metadata::placement::coordinator_slot;

use common::{
    broker::Broker,
    cluster::{run_weir, Cluster},
    interop::{run_script, run_script_logged, spawn_script_logged},
    scratch_dir,
};

/// Records in the interrupted transaction, over 4 partitions.
const RECORDS: &str = "400";

/// Waits for `writer` (txn_crash.py write) to end, and fails with its output and `logs`
/// unless it ended well.
fn writer_succeeds(mut writer: Child, log: &std::path::Path, logs: impl FnOnce() -> String) {
    let status = writer.wait().expect("wait for the writer");
    let said = std::fs::read_to_string(log).unwrap_or_default();
    assert!(status.success(), "the writer failed:\n{said}\n{}", logs());
    eprint!("{said}");
}

/// Ends the python client `writer` runs under `timeout`: SIGTERM, which `timeout`
/// passes on to the client (a SIGKILL would end `timeout` alone and leave the client
/// retrying against the restarted broker).
fn client_dies(writer: &mut Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &writer.id().to_string()])
        .status();
    let _ = writer.wait();
}

/// Whether the client lives through the broker's crash to ask for its transaction's
/// end again.
enum Client {
    DiesWithTheBroker,
    Retries,
}

/// How many shards the broker runs, before the crash and after it.
enum Shards {
    /// Two (the topic's partitions on both): the coordinator sends the other shard its
    /// markers once its decision is durable.
    Two,
    /// One: the coordinator's decision goes into the group commit just ahead of the
    /// markers of its own partitions, and is durable with them.
    One,
    /// One, then two: the transaction's id is coordinated by shard 1 after the
    /// restart, from the state shard 0 logged, which the start applied to LMDB before
    /// any shard served.
    OneThenTwo,
}

/// One broker armed with `probe`; a transaction of `RECORDS` records ends with `ending`
/// (commit or abort), the broker dies at the probe and is started again without it.
fn crash_in_the_end(probe: &str, ending: &str, client: Client, shards: Shards) {
    let dir = scratch_dir();
    let (cores, restart_on): (&[usize], &[usize]) = match shards {
        Shards::Two => (&[0, 1], &[0, 1]),
        Shards::One => (&[0], &[0]),
        Shards::OneThenTwo => (&[0], &[0, 1]),
    };
    let mut broker = Broker::start_armed(&dir.path().join("data"), cores, &[], Some(probe));
    let bootstrap = broker.bootstrap();
    let topic = format!(
        "crash-{probe}-{ending}-{}",
        cores.len() * 10 + restart_on.len()
    );
    // An id the last shard coordinates, before and after: another shard after a
    // restart on more shards.
    let id = (0..)
        .map(|n| format!("tx-crash-{n}"))
        .find(|id| {
            coordinator_slot(id, cores.len()) == cores.len() - 1
                && coordinator_slot(id, restart_on.len()) == restart_on.len() - 1
        })
        .expect("an id");
    let id = id.as_str();
    let log = dir.path().join("writer.log");
    let mut writer = spawn_script_logged(
        "txn_crash.py",
        &["write", &bootstrap, &topic, id, ending, RECORDS, "1"],
        180,
        Some(&log),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while broker.is_running() {
        assert!(
            Instant::now() < deadline,
            "the broker never reached {probe}:\n{}\nbroker log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            broker.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!broker.log().contains("panicked"), "{}", broker.log());
    broker.failure_probe = None;
    broker.set_cores(restart_on);
    match client {
        Client::DiesWithTheBroker => {
            client_dies(&mut writer);
            broker.crash_and_restart();
        }
        Client::Retries => {
            broker.crash_and_restart();
            writer_succeeds(writer, &log, || format!("broker log:\n{}", broker.log()));
        }
    }
    let check = ["check", &bootstrap, &topic, id, ending, RECORDS, "reuse"];
    run_script("txn_crash.py", &broker, &check.map(String::from));
    // The id kept its producer through the crash: the check's new producer of it was
    // given the next epoch of the same producer id, not a fresh id at epoch 0 (its
    // state lost).
    let (ok, described) = run_weir(&["transactions", "describe", id, "--bootstrap", &bootstrap]);
    assert!(ok, "{described}");
    let epoch: i16 = described
        .split(" epoch ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|e| e.trim().parse().ok())
        .unwrap_or_else(|| panic!("no epoch in {described:?}"));
    assert!(
        epoch >= 1,
        "the id's state was lost in the crash: {described}\n{}",
        broker.log()
    );
}

#[test]
fn a_commit_decided_before_a_crash_is_completed_after_it() {
    crash_in_the_end(
        "txn-prepared",
        "commit",
        Client::DiesWithTheBroker,
        Shards::Two,
    );
}

#[test]
fn an_abort_decided_before_a_crash_is_completed_after_it() {
    crash_in_the_end(
        "txn-prepared",
        "abort",
        Client::DiesWithTheBroker,
        Shards::Two,
    );
}

#[test]
fn a_leader_killed_with_its_markers_durable_but_unanswered_loses_and_repeats_nothing() {
    crash_in_the_end("txn-marker-written", "commit", Client::Retries, Shards::Two);
}

#[test]
fn a_transaction_marked_but_not_recorded_complete_completes_after_a_crash() {
    crash_in_the_end(
        "txn-marked",
        "abort",
        Client::DiesWithTheBroker,
        Shards::Two,
    );
}

#[test]
fn a_single_shards_decision_and_markers_durable_together_survive_a_crash_before_the_answer() {
    // The coordinator's own partitions: its decision and markers share a group commit.
    crash_in_the_end("txn-marker-written", "commit", Client::Retries, Shards::One);
}

#[test]
fn a_single_shards_transaction_marked_but_not_recorded_complete_completes_after_a_crash() {
    crash_in_the_end(
        "txn-marked",
        "commit",
        Client::DiesWithTheBroker,
        Shards::One,
    );
}

#[test]
fn a_decision_logged_by_one_shard_is_completed_by_another_after_a_restart_on_more_shards() {
    crash_in_the_end(
        "txn-prepared",
        "commit",
        Client::DiesWithTheBroker,
        Shards::OneThenTwo,
    );
}

#[test]
fn another_host_finishes_a_commit_whose_coordinator_died_after_deciding_it() {
    // Every host is armed: only the transactional id's coordinator reaches the probe,
    // and a host that inherits the decided transaction finishes it without passing it.
    let mut cluster = Cluster::start_on(None, 3, 1, |host| {
        host.add_flags(&["--session-timeout", "3s"]);
        host.failure_probe = Some("txn-prepared".into());
    });
    cluster.converged_metadata(Duration::from_secs(15));
    let bootstrap: String = (1..=3)
        .map(|h| cluster.host(h).bootstrap())
        .collect::<Vec<_>>()
        .join(",");
    let log = cluster.dir.path().join("writer.log");
    let mut writer = spawn_script_logged(
        "txn_crash.py",
        &[
            "write",
            &bootstrap,
            "crash-rf3",
            "tx-crash-rf3",
            "commit",
            RECORDS,
            "3",
        ],
        180,
        Some(&log),
    );
    let logs = |cluster: &mut Cluster| -> String {
        (1..=3)
            .map(|h| format!("--- host {h}\n{}", cluster.host(h).log()))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let coordinator = loop {
        if let Some(h) = (1..=3).find(|&h| cluster.host(h).exited()) {
            break h;
        }
        assert!(
            Instant::now() < deadline,
            "no host reached txn-prepared:\n{}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            logs(&mut cluster)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("host {coordinator} died with the commit decided");
    client_dies(&mut writer);
    // The other hosts finish the commit while the coordinator's host is still down, and
    // it stays finished when that host is back.
    let check = [
        "check",
        &bootstrap,
        "crash-rf3",
        "tx-crash-rf3",
        "commit",
        RECORDS,
    ];
    run_script_logged("txn_crash.py", &check.map(String::from), || {
        logs(&mut cluster)
    });
    let host = cluster.host(coordinator);
    host.failure_probe = None;
    host.spawn();
    host.wait_serving();
    run_script_logged("txn_crash.py", &check.map(String::from), || {
        logs(&mut cluster)
    });
}
