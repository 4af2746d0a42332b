//! The offsets journal (`__consumer_offsets`) keeps the live state of its groups and
//! transactional ids, not their history: real `weir serve` hosts on loopback, group
//! commits, a group deletion and a transactional id over the Kafka protocol, a host away
//! while the journal is snapshotted past what it holds, and that host then coordinating.

#[allow(dead_code)]
mod common;

use std::time::{Duration, Instant};

use common::{
    cluster::{create_topic, run_weir, Cluster},
    kafka_client::name,
    partitions::wait_for,
};
use kafka_protocol::messages::{
    offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
    offset_fetch_request::OffsetFetchRequestTopic,
    DeleteGroupsRequest, DescribeLogDirsRequest, FindCoordinatorRequest, GroupId,
    InitProducerIdRequest, OffsetCommitRequest, OffsetFetchRequest, TransactionalId,
};
use weir::metadata::placement::{coordinator_slot, COORDINATOR_SLOTS};
use weir_client::blocking::Connection;

const JOURNAL: &str = "__consumer_offsets";
const TOPIC: &str = "work";
/// The journal's segment size in this test: the smallest there is, so snapshots free
/// segments soon.
const SEGMENT_BYTES: u64 = 1 << 20;
/// Commits of the busy group: about 6 MB of journal without snapshots.
const COMMITS: i64 = 1500;

/// A name like `prefix-N` in the same journal partition as `like`.
fn same_slot(like: &str, prefix: &str) -> String {
    let slot = coordinator_slot(like, COORDINATOR_SLOTS);
    (0..)
        .map(|n| format!("{prefix}-{n}"))
        .find(|n| coordinator_slot(n, COORDINATOR_SLOTS) == slot)
        .expect("a name in the slot")
}

/// A connection to the coordinator of `key` (0: group, 1: transactional id), asked of
/// `bootstrap` until one answers.
fn coordinator(bootstrap: &str, key: &str, key_type: i8) -> (Connection, i32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut request = FindCoordinatorRequest::default();
        request.key = key.to_string().into();
        request.key_type = key_type;
        let answer =
            Connection::open(bootstrap, "journal-test").and_then(|mut c| c.call(&request, 3));
        if let Ok(a) = answer {
            if a.error_code == 0 {
                let addr = format!("{}:{}", a.host.as_str(), a.port);
                if let Ok(c) = Connection::open(&addr, "journal-test") {
                    return (c, a.node_id.0);
                }
            }
        }
        assert!(Instant::now() < deadline, "no coordinator for {key}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Commits `offset` (with 1000 bytes of metadata) to the 4 partitions of the topic as a
/// group without members; the error codes.
fn commit(c: &mut Connection, group: &str, offset: i64) -> Vec<i16> {
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(group.to_string().into());
    request.generation_id_or_member_epoch = -1;
    request.topics = vec![OffsetCommitRequestTopic::default()
        .with_name(name(TOPIC))
        .with_partitions(
            (0..4)
                .map(|p| {
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(offset)
                        .with_committed_metadata(Some("m".repeat(1000).into()))
                })
                .collect(),
        )];
    let answer = c.call(&request, 8).expect("commit answered");
    answer.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

/// The group's committed offset of each of the topic's 4 partitions (-1: none).
fn committed(c: &mut Connection, group: &str) -> Vec<i64> {
    let mut request = OffsetFetchRequest::default();
    request.group_id = GroupId(group.to_string().into());
    request.topics = Some(vec![OffsetFetchRequestTopic::default()
        .with_name(name(TOPIC))
        .with_partition_indexes(vec![0, 1, 2, 3])]);
    // A coordinator still replaying its journal answers NOT_COORDINATOR (16) a while.
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        let answer = c.call(&request, 6).expect("offset fetch answered");
        if answer.error_code != 16 || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(answer.error_code, 0, "{answer:?}");
    answer.topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect()
}

/// InitProducerId of transactional id `id`: its producer id and epoch.
fn init_producer(c: &mut Connection, id: &str) -> (i64, i16) {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = Some(TransactionalId(id.to_string().into()));
    request.transaction_timeout_ms = 60_000;
    request.producer_id = (-1).into();
    request.producer_epoch = -1;
    let answer = c.call(&request, 3).expect("init answered");
    assert_eq!(answer.error_code, 0, "{answer:?}");
    (answer.producer_id.0, answer.producer_epoch)
}

/// The bytes of journal partition `slot` on the host behind `bootstrap`.
fn journal_bytes(bootstrap: &str, slot: usize) -> i64 {
    let mut c = Connection::open(bootstrap, "journal-test").expect("connect");
    let mut request = DescribeLogDirsRequest::default();
    request.topics = None; // every partition
    let answer = c.call(&request, 1).expect("log dirs");
    answer
        .results
        .iter()
        .flat_map(|d| &d.topics)
        .filter(|t| t.name.0.as_str() == JOURNAL)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index as usize == slot)
        .map(|p| p.partition_size)
        .unwrap_or_else(|| panic!("{bootstrap} lists no replica of {JOURNAL}-{slot}: {answer:?}"))
}

/// How many records each replay of journal partition `slot` in `log` applied.
fn replays(log: &str, slot: usize) -> Vec<u64> {
    log.lines()
        .filter(|l| {
            l.contains("coordinating the groups") && l.contains(&format!("partition={slot} "))
        })
        .filter_map(|l| {
            l.split("commits=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn the_offsets_journal_keeps_live_state_and_a_host_that_missed_a_deletion_forgets_it() {
    let mut cluster = Cluster::start(3, 1);
    cluster.converged_metadata(Duration::from_secs(15));
    let b1 = cluster.host(1).bootstrap();
    create_topic(&b1, TOPIC, 4, 3);
    wait_for(
        &b1,
        JOURNAL,
        Duration::from_secs(20),
        "journal in sync",
        |r| r.isr.len() == 3,
    );
    let (ok, out) = run_weir(&[
        "topics",
        "alter-config",
        JOURNAL,
        &format!("segment.bytes={SEGMENT_BYTES}"),
        "--bootstrap",
        &b1,
    ]);
    assert!(ok, "{out}");
    let busy = "busy";
    let slot = coordinator_slot(busy, COORDINATOR_SLOTS);
    let (gone, txn_id) = (same_slot(busy, "gone"), same_slot(busy, "txn"));

    // A group that will be deleted, and a transactional id, in the busy group's slot.
    let (mut c, node) = coordinator(&b1, busy, 0);
    assert_eq!(commit(&mut c, &gone, 5), vec![0; 4]);
    let (mut t, _) = coordinator(&b1, &txn_id, 1);
    let (producer_id, epoch) = init_producer(&mut t, &txn_id);

    // A host holding both is away while the group is deleted and the journal grows far
    // past a snapshot.
    let coordinator_host = (node / 1024) as u32;
    let away = coordinator_host % 3 + 1;
    cluster.host(away).kill();
    let mut delete = DeleteGroupsRequest::default();
    delete.groups_names = vec![GroupId(gone.clone().into())];
    let answer = c.call(&delete, 2).expect("delete answered");
    assert_eq!(answer.results[0].error_code, 0, "{answer:?}");
    for offset in 0..COMMITS {
        assert_eq!(commit(&mut c, busy, offset), vec![0; 4], "commit {offset}");
    }
    let coordinator_bootstrap = cluster.host(coordinator_host).bootstrap();
    let bound = (3 * SEGMENT_BYTES) as i64;
    let deadline = Instant::now() + Duration::from_secs(20);
    while journal_bytes(&coordinator_bootstrap, slot) > bound {
        assert!(
            Instant::now() < deadline,
            "journal partition {slot} holds {} bytes after {COMMITS} commits\n{}",
            journal_bytes(&coordinator_bootstrap, slot),
            cluster.host(coordinator_host).log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        cluster
            .host(coordinator_host)
            .log()
            .contains("offsets journal snapshot written"),
        "no snapshot was logged"
    );

    // It comes back (its journal restarted at the snapshot) and takes every partition.
    cluster.host(away).spawn();
    cluster.host(away).wait_serving();
    wait_for(&b1, JOURNAL, Duration::from_secs(30), "back in sync", |r| {
        r.isr.len() == 3
    });
    let controller = cluster.host(away).controller();
    for other in (1..=3).filter(|h| *h != away) {
        let (ok, out) = run_weir(&[
            "cluster",
            "drain",
            "--node",
            &other.to_string(),
            "--controller",
            &controller,
        ]);
        assert!(ok, "{out}");
    }
    let via = cluster.host(away).bootstrap();
    wait_for(
        &via,
        JOURNAL,
        Duration::from_secs(30),
        "led by the returned host",
        |r| r.leader / 1024 == i64::from(away),
    );
    let (mut c, node) = coordinator(&via, busy, 0);
    assert_eq!((node / 1024) as u32, away);
    assert_eq!(committed(&mut c, busy), vec![COMMITS - 1; 4]);
    assert_eq!(
        committed(&mut c, &gone),
        vec![-1; 4],
        "the deleted group came back"
    );
    let (mut t, _) = coordinator(&via, &txn_id, 1);
    assert_eq!(init_producer(&mut t, &txn_id), (producer_id, epoch + 1));
    let log = cluster.host(away).log();
    let replayed = replays(&log, slot);
    assert!(
        replayed.last().is_some_and(|n| *n < COMMITS as u64 / 2),
        "the returned host replayed {replayed:?} records of partition {slot}, \
         not what the snapshot kept of more than {COMMITS}"
    );
    let kept = journal_bytes(&via, slot);
    assert!(kept <= bound, "{kept} bytes");
    // The figure (run with --nocapture): what the partition keeps of what it took.
    eprintln!(
        "journal partition {slot}: {kept} bytes kept, {COMMITS} commits of ~4 KiB taken, \
         {} records replayed by the returned host",
        replayed.last().copied().unwrap_or(0)
    );
}
