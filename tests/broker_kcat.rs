//! The real broker with a real Kafka client: kcat (librdkafka) produces and consumes
//! through weir's shards, with every ack mode, across a crash.

#[allow(dead_code)]
mod common;

use std::collections::BTreeMap;

use common::{broker::Broker, kcat, scratch_dir};

/// `partition offset key value` lines of everything in `topic`.
fn consume_all(broker: &Broker, topic: &str) -> Vec<(u32, u64, String, String)> {
    kcat(
        &[
            "-b",
            &broker.bootstrap(),
            "-t",
            topic,
            "-C",
            "-e",
            "-q",
            "-o",
            "beginning",
            "-f",
            "%p %o %k %s\n",
        ],
        None,
    )
    .lines()
    .map(|l| {
        let mut f = l.splitn(4, ' ');
        let p = f.next().and_then(|x| x.parse().ok()).expect("partition");
        let o = f.next().and_then(|x| x.parse().ok()).expect("offset");
        (
            p,
            o,
            f.next().unwrap_or("").to_string(),
            f.next().unwrap_or("").to_string(),
        )
    })
    .collect()
}

#[test]
fn kcat_produces_and_consumes_across_shards_with_every_ack_mode() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &["--default-partitions", "4"]);
    let metadata = kcat(&["-b", &broker.bootstrap(), "-L"], None);
    assert!(metadata.contains("2 brokers"), "{metadata}");
    for shard in 0..2 {
        assert!(
            metadata.contains(&format!(
                "broker {shard} at 127.0.0.1:{}",
                broker.port + shard
            )),
            "every shard is a broker on its own port: {metadata}"
        );
    }
    let mut sent = BTreeMap::new();
    for acks in ["all", "1", "0"] {
        let lines: String = (0..200)
            .map(|i| format!("{acks}-k{i}:{acks}-v{i}\n"))
            .collect();
        kcat(
            &[
                "-b",
                &broker.bootstrap(),
                "-t",
                "orders",
                "-P",
                "-K:",
                "-X",
                &format!("acks={acks}"),
            ],
            Some(&lines),
        );
        for i in 0..200 {
            sent.insert(format!("{acks}-k{i}"), format!("{acks}-v{i}"));
        }
    }
    let metadata = kcat(&["-b", &broker.bootstrap(), "-L", "-t", "orders"], None);
    let shards = [0, 1];
    let placed = weir::metadata::placement::place(&shards, "orders", 0..4);
    for p in 0..4 {
        let leader = placed[p as usize];
        assert!(
            metadata.contains(&format!("partition {p}, leader {leader},")),
            "partition {p} is led by shard {leader}: {metadata}"
        );
    }
    // An acks=0 producer is done once its batches are written to the socket: they
    // become readable when the broker has made them durable, a moment later (kcat -e
    // stops at the high watermark it finds).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut got = consume_all(&broker, "orders");
    while got.len() < sent.len() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        got = consume_all(&broker, "orders");
    }
    let partitions: std::collections::BTreeSet<u32> = got.iter().map(|r| r.0).collect();
    assert_eq!(
        partitions.len(),
        4,
        "keys spread over all four partitions (both shards)"
    );
    let received: BTreeMap<String, String> =
        got.iter().map(|r| (r.2.clone(), r.3.clone())).collect();
    assert_eq!(received.len(), got.len(), "no duplicates");
    assert_eq!(received, sent);
    for p in partitions {
        let offsets: Vec<u64> = got.iter().filter(|r| r.0 == p).map(|r| r.1).collect();
        assert_eq!(
            offsets,
            (0..offsets.len() as u64).collect::<Vec<_>>(),
            "dense offsets in partition {p}"
        );
    }
}

#[test]
fn acknowledged_messages_survive_a_crash() {
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("data"), 2, &["--default-partitions", "3"]);
    let first: String = (0..300).map(|i| format!("a{i}\n")).collect();
    kcat(
        &[
            "-b",
            &broker.bootstrap(),
            "-t",
            "events",
            "-P",
            "-X",
            "acks=all",
        ],
        Some(&first),
    );
    broker.crash_and_restart();
    let second: String = (0..100).map(|i| format!("b{i}\n")).collect();
    kcat(
        &[
            "-b",
            &broker.bootstrap(),
            "-t",
            "events",
            "-P",
            "-X",
            "acks=all",
        ],
        Some(&second),
    );
    let mut values: Vec<String> = consume_all(&broker, "events")
        .into_iter()
        .map(|r| r.3)
        .collect();
    values.sort();
    let mut want: Vec<String> = (0..300)
        .map(|i| format!("a{i}"))
        .chain((0..100).map(|i| format!("b{i}")))
        .collect();
    want.sort();
    assert_eq!(values, want);
}

#[test]
fn kcat_round_trips_100k_keyed_messages_in_partition_order_across_a_clean_restart() {
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("data"), 2, &["--default-partitions", "6"]);
    let count = 100_000;
    let lines: String = (0..count)
        .map(|i| format!("key-{}:value-{i}\n", i % 977))
        .collect();
    kcat(
        &[
            "-b",
            &broker.bootstrap(),
            "-t",
            "bulk",
            "-P",
            "-K:",
            "-X",
            "acks=all",
            "-X",
            "linger.ms=5",
        ],
        Some(&lines),
    );
    broker.stop();
    // A clean stop closes every log cleanly: each partition records where its active
    // segment's data ends, so the restart keeps that file whole (and takes the record).
    let partitions: Vec<_> = (0..6)
        .map(|p| broker.data_dir.join(format!("bulk-{p}")))
        .collect();
    for p in &partitions {
        assert!(
            p.join("clean-close").exists(),
            "{} has no record",
            p.display()
        );
    }
    broker.restart();
    for p in &partitions {
        assert!(
            !p.join("clean-close").exists(),
            "{} kept its record",
            p.display()
        );
    }
    let got = consume_all(&broker, "bulk");
    assert_eq!(
        got.len(),
        count,
        "every message is back after a clean restart"
    );
    // Per key, values come back in the order they were sent (one key, one partition).
    let mut last_seen: BTreeMap<String, (u32, i64)> = BTreeMap::new();
    for (partition, _, key, value) in &got {
        let n: i64 = value.trim_start_matches("value-").parse().expect("value");
        let key_n: i64 = key.trim_start_matches("key-").parse().expect("key");
        assert_eq!(n % 977, key_n, "value {value} arrived under key {key}");
        if let Some((p, prev)) = last_seen.insert(key.clone(), (*partition, n)) {
            assert_eq!(p, *partition, "one key, one partition");
            assert!(prev < n, "key {key}: {prev} before {n}");
        }
    }
}
