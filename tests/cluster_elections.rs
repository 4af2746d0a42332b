//! Kafka's `kafka-leader-election.sh` (org.apache.kafka.tools.LeaderElectionCommand
//! from kafka-tools 4.4.0) against weir hosts: a preferred election hands a partition
//! back to its first replica once it is in sync again (with the controller's own
//! rebalancing off, so only the tool can), a second one is not needed; an unclean
//! election gives a partition whose only in-sync replica is dead to the live replica
//! out of sync, which a preferred one refuses to do.

#[allow(dead_code)]
mod common;

use std::time::Duration;

use common::{
    cluster::{create_topic, Cluster},
    jvm::run_kafka_tool,
    kcat,
    partitions::{describe, wait_for},
};

/// Runs the tool through `bootstrap` with `args`; returns its exit success and output.
fn leader_election(bootstrap: &str, args: &[&str]) -> (bool, String) {
    run_kafka_tool(
        "org.apache.kafka.tools.LeaderElectionCommand",
        bootstrap,
        args,
    )
}

#[test]
fn a_preferred_election_hands_leadership_back_to_the_first_replica() {
    let mut cluster = Cluster::start_configured(3, 1, |_| {
        vec!["--auto-leader-rebalance".into(), "false".into()]
    });
    cluster.converged_metadata(Duration::from_secs(15));
    let b1 = cluster.host(1).bootstrap();
    create_topic(&b1, "elected", 1, 3);
    let rows = wait_for(&b1, "elected", Duration::from_secs(15), "in sync", |r| {
        r.isr.len() == 3
    });
    let preferred = rows[0].replicas[0];
    let host = (preferred / 1024) as u32;
    cluster.host(host).kill();
    let via = (1..=3)
        .find(|h| *h != host)
        .map(|h| cluster.host(h).bootstrap())
        .expect("another host");
    wait_for(
        &via,
        "elected",
        Duration::from_secs(15),
        "led elsewhere",
        |r| r.leader >= 0 && r.leader != preferred,
    );
    cluster.host(host).spawn();
    cluster.host(host).wait_serving();
    let rows = wait_for(
        &via,
        "elected",
        Duration::from_secs(30),
        "back in sync",
        |r| r.isr.len() == 3,
    );
    assert_ne!(rows[0].leader, preferred, "nothing moved it back by itself");
    let partition = [
        "--election-type",
        "preferred",
        "--topic",
        "elected",
        "--partition",
        "0",
    ];
    let (ok, out) = leader_election(&via, &partition);
    assert!(ok, "{out}");
    assert!(
        out.contains("Successfully completed leader election"),
        "{out}"
    );
    let rows = describe(&via, "elected");
    assert_eq!(rows[0].leader, preferred, "the first replica leads again");
    let (ok, out) = leader_election(&via, &partition);
    assert!(ok, "{out}");
    assert!(out.contains("already elected"), "not needed twice: {out}");
    // Every partition at once: nothing to do, nothing refused.
    let (ok, out) = leader_election(
        &via,
        &["--election-type", "preferred", "--all-topic-partitions"],
    );
    assert!(ok, "{out}");
    let (ok, out) = leader_election(
        &via,
        &[
            "--election-type",
            "preferred",
            "--topic",
            "nothing-here",
            "--partition",
            "0",
        ],
    );
    assert!(!ok && out.contains("UnknownTopicOrPartition"), "{out}");
}

#[test]
fn an_unclean_election_gives_a_leaderless_partition_to_a_replica_out_of_sync() {
    // The voters run the controller alone, so two brokers can die with the quorum up.
    let mut cluster = Cluster::start_with(3, 1, &[1, 2, 3]);
    cluster.add_broker(4, 1);
    cluster.add_broker(5, 1);
    let b4 = cluster.host(4).bootstrap();
    let b5 = cluster.host(5).bootstrap();
    create_topic(&b4, "lossy", 1, 2);
    wait_for(&b4, "lossy", Duration::from_secs(15), "in sync", |r| {
        r.isr.len() == 2
    });
    kcat(&["-b", &b4, "-P", "-t", "lossy", "-p", "0"], Some("kept\n"));
    // 5 dies and leaves the ISR; 4, the last in sync, dies; 5 returns out of sync.
    cluster.host(5).kill();
    wait_for(&b4, "lossy", Duration::from_secs(15), "5 out", |r| {
        r.isr == [4096]
    });
    cluster.host(4).kill();
    cluster.host(5).spawn();
    cluster.host(5).wait_serving();
    wait_for(&b5, "lossy", Duration::from_secs(15), "leaderless", |r| {
        r.leader < 0
    });
    let partition = ["--topic", "lossy", "--partition", "0"];
    let (ok, out) = leader_election(
        &b5,
        &[&["--election-type", "preferred"][..], &partition].concat(),
    );
    assert!(!ok && out.contains("PreferredLeaderNotAvailable"), "{out}");
    let (ok, out) = leader_election(
        &b5,
        &[&["--election-type", "unclean"][..], &partition].concat(),
    );
    assert!(ok, "{out}");
    assert!(
        out.contains("Successfully completed leader election"),
        "{out}"
    );
    let rows = wait_for(&b5, "lossy", Duration::from_secs(15), "led by 5", |r| {
        r.leader == 5120
    });
    assert_eq!(rows[0].isr, [5120]);
    kcat(
        &["-b", &b5, "-P", "-t", "lossy", "-p", "0"],
        Some("after\n"),
    );
}
