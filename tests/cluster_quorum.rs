//! Kafka's `kafka-metadata-quorum.sh` (org.apache.kafka.tools.MetadataQuorumCommand from
//! kafka-tools 4.4.0) against weir hosts: `describe --status` names the controller
//! leader among the voters and a broker that only observes, `describe --replication`
//! shows every voter caught up, and after the leader's host is killed the tool, asked
//! through another host, names the new leader at a later epoch. `weir cluster
//! add-voter/remove-voter` change the quorum while topics are created without pause:
//! a fourth voter joins, the leader leaves, and a voter's disk is replaced.

#[allow(dead_code)]
mod common;

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use common::{
    cluster::{run_weir, Cluster},
    jvm::run_kafka_tool,
};

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

/// Creates topics one after another through `bootstrap` until `stop`; the longest time
/// between two successful creates, and how many succeeded. Every refusal is printed
/// with when it happened, so a long wait can be told apart.
fn create_topics_until(bootstrap: String, stop: Arc<AtomicBool>) -> (Duration, u32) {
    let start = Instant::now();
    let (mut last, mut longest, mut created) = (Instant::now(), Duration::ZERO, 0u32);
    let mut tried_before = false;
    while !stop.load(Ordering::Relaxed) {
        let name = format!("written-{created}");
        let asked = Instant::now();
        let (ok, out) = run_weir(&["topics", "--bootstrap", &bootstrap, "create", &name]);
        // A try cut off with its host (killed below) may have created the topic: the
        // next try then finds it, which is a success of that one, as for Kafka's
        // clients.
        let retried_and_found = tried_before && out.contains("TopicAlreadyExists");
        tried_before = !ok;
        if ok || retried_and_found {
            tried_before = false;
            longest = longest.max(last.elapsed());
            last = Instant::now();
            created += 1;
        } else {
            eprintln!(
                "at {:?} (asked {:?} before): create {name} refused: {}",
                start.elapsed(),
                asked.elapsed(),
                out.trim()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    (longest.max(last.elapsed()), created)
}

/// `weir cluster ARGS --controller CONTROLLER`, which must succeed; its output.
fn cluster_command(controller: &str, args: &[&str]) -> String {
    let mut all = vec!["cluster"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--controller", controller]);
    let (ok, out) = run_weir(&all);
    assert!(ok, "weir {all:?}: {out}");
    out
}

/// The voter ids `describe --status` lists, once `want` holds of them (or panics).
fn voters_once(bootstrap: &str, want: impl Fn(&[u64]) -> bool) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = describe(bootstrap, "--status");
        let line = status
            .lines()
            .find(|l| l.starts_with("CurrentVoters:"))
            .unwrap_or_default();
        let ids: Vec<u64> = line
            .split("\"id\": ")
            .skip(1)
            .filter_map(|s| s.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
            .collect();
        if want(&ids) {
            return ids;
        }
        assert!(Instant::now() < deadline, "voters stayed {ids:?}: {status}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn voters_join_and_leave_while_topics_are_created_without_pause() {
    let mut cluster = Cluster::start(3, 1);
    let listen = cluster.unstarted_host(4, 1, &[]).controller();
    let joining = [
        "--process-roles",
        "broker,controller",
        "--controller-listen",
        &listen,
    ];
    let mut fourth = cluster.unstarted_host(4, 1, &joining);
    fourth.voter = true;
    fourth.spawn();
    fourth.wait_serving();
    cluster.hosts.push(fourth);
    cluster.converged_metadata(Duration::from_secs(15));
    let b4 = cluster.host(4).bootstrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        // Every host, as a client's bootstrap list: the host whose disk is replaced
        // below is down for its restart, which is not a metadata outage.
        let bootstrap: Vec<String> = cluster.hosts.iter().map(|h| h.bootstrap()).collect();
        let (bootstrap, stop) = (bootstrap.join(","), Arc::clone(&stop));
        std::thread::spawn(move || create_topics_until(bootstrap, stop))
    };
    let start = Instant::now();
    let c1 = cluster.host(1).controller();
    let out = cluster_command(&c1, &["add-voter", "--node", "4", "--address", &listen]);
    assert!(out.contains(&format!("4@{listen}")), "{out}");
    voters_once(&b4, |v| v == [1, 2, 3, 4]);
    // The leader itself leaves; another voter takes over.
    let leader = cluster.leader();
    let via = cluster.host(if leader == 4 { 1 } else { 4 }).controller();
    cluster_command(&via, &["remove-voter", "--node", &leader.to_string()]);
    voters_once(&b4, |v| v.len() == 3 && !v.contains(&u64::from(leader)));
    // A voter's disk replaced: out of the quorum, wiped, back in.
    let replaced = (1..=4).find(|h| *h != leader && *h != 4).expect("a voter");
    let address = cluster.host(replaced).controller();
    cluster_command(&via, &["remove-voter", "--node", &replaced.to_string()]);
    eprintln!(
        "at {:?}: host {replaced} restarts with a new disk",
        start.elapsed()
    );
    let host = cluster.host(replaced);
    host.kill();
    std::fs::remove_dir_all(host.data_dir.join("controller")).expect("wipe its quorum state");
    host.spawn();
    host.wait_serving();
    eprintln!("at {:?}: host {replaced} serves again", start.elapsed());
    cluster_command(
        &via,
        &[
            "add-voter",
            "--node",
            &replaced.to_string(),
            "--address",
            &address,
        ],
    );
    voters_once(&b4, |v| v.len() == 3 && v.contains(&u64::from(replaced)));
    stop.store(true, Ordering::Relaxed);
    let (longest, created) = writer.join().expect("writer");
    eprintln!("{created} topics created; the longest wait between two: {longest:?}");
    assert!(created > 10, "topics were created throughout ({created})");
    assert!(
        longest < Duration::from_secs(5),
        "metadata writes stopped for {longest:?} (an election takes about one second)"
    );
}
