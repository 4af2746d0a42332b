//! Kafka's `kafka-metadata-quorum.sh` (org.apache.kafka.tools.MetadataQuorumCommand from
//! kafka-tools 4.4.0) against weir hosts: `describe --status` names the controller
//! leader among the voters and a broker that only observes, `describe --replication`
//! shows every voter caught up, and after the leader's host is killed the tool, asked
//! through another host, names the new leader at a later epoch.

#[allow(dead_code)]
mod common;

use std::time::{Duration, Instant};

use common::{cluster::Cluster, jvm::run_kafka_tool};

/// `describe ARGS` through `bootstrap`; the tool's output, which must succeed.
fn describe(bootstrap: &str, what: &str) -> String {
    let (ok, out) = run_kafka_tool(
        "org.apache.kafka.tools.MetadataQuorumCommand",
        bootstrap,
        &["describe", what],
    );
    assert!(ok, "kafka-metadata-quorum describe {what}: {out}");
    out
}

/// The number after `field:` in `describe --status` output.
fn field(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// The rows of `describe --replication`: node id, log end offset, lag, status.
fn replication(bootstrap: &str) -> Vec<(u64, i64, i64, String)> {
    describe(bootstrap, "--replication")
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            match cols.as_slice() {
                [id, _dir, end, lag, _fetch, _caught, status, ..] => Some((
                    id.parse().ok()?,
                    end.parse().ok()?,
                    lag.parse().ok()?,
                    status.to_string(),
                )),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn the_quorum_tool_shows_the_voters_an_observer_and_a_new_leader_after_a_kill() {
    let mut cluster = Cluster::start(3, 1);
    cluster.add_broker(4, 1);
    cluster.converged_metadata(Duration::from_secs(15));
    let b4 = cluster.host(4).bootstrap();
    let status = describe(&b4, "--status");
    let leader = field(&status, "LeaderId");
    assert!((1..=3).contains(&leader), "a voter leads: {status}");
    for voter in 1..=3 {
        assert!(
            status.contains(&format!("\"id\": {voter}")),
            "voter {voter} listed: {status}"
        );
    }
    assert!(
        status.contains("CurrentObservers:       [{\"id\": 4"),
        "the broker observes: {status}"
    );
    let epoch = field(&status, "LeaderEpoch");
    // Every voter holds what the leader has once the quorum is quiet.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let rows = replication(&b4);
        let voters: Vec<_> = rows.iter().filter(|r| r.3 != "Observer").collect();
        if voters.len() == 3 && voters.iter().all(|r| r.2 == 0) {
            assert!(
                voters.iter().any(|r| r.0 == leader && r.3 == "Leader"),
                "{rows:?}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "voters never caught up: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    cluster.host(leader as u32).kill();
    let via = cluster.host(if leader == 1 { 2 } else { 1 }).bootstrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (ok, status) = run_kafka_tool(
            "org.apache.kafka.tools.MetadataQuorumCommand",
            &via,
            &["describe", "--status"],
        );
        if ok && field(&status, "LeaderId") != leader {
            assert!(field(&status, "LeaderEpoch") > epoch, "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "no new leader named: {status}");
        std::thread::sleep(Duration::from_millis(500));
    }
}
