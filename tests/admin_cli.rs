//! `weir topics …` and `weir groups …` against a running broker, and the binary's own
//! set-up (its allocator's options).

#[allow(dead_code)]
mod common;

use std::process::Command;

use bytes::Bytes;
use common::{
    broker::Broker,
    kafka_client::{call, connect, produce},
    scratch_dir,
};
use kafka_protocol::{
    messages::{
        join_group_request::JoinGroupRequestProtocol,
        produce_request::{PartitionProduceData, TopicProduceData},
        GroupId, JoinGroupRequest, ProduceRequest, SyncGroupRequest, TopicName,
    },
    protocol::StrBytes,
    ResponseError,
};
use weir_client::record_batch::build_batch;

fn weir(broker: &Broker, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .args(["--bootstrap", &broker.bootstrap()])
        .output()
        .expect("run weir");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn produce_to_every_partition(broker: &Broker, topic: &str, partitions: i32) {
    for p in 0..partitions {
        for shard in 0..broker.shards as u16 {
            let mut data = PartitionProduceData::default();
            data.index = p;
            data.records = Some(Bytes::from(build_batch(5, b"x", 0)));
            let mut t = TopicProduceData::default();
            t.name = TopicName(StrBytes::from_string(topic.to_string()));
            t.partition_data = vec![data];
            let mut req = ProduceRequest::default();
            req.acks = -1;
            req.timeout_ms = 5000;
            req.topic_data = vec![t];
            let r = call(&mut connect(broker.port + shard), &req, 9);
            if r.responses[0].partition_responses[0].error_code == 0 {
                break;
            }
        }
    }
}

#[test]
fn topics_and_groups_commands_work_against_a_running_broker() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let (ok, out) = weir(
        &broker,
        &["topics", "create", "orders", "--partitions", "4"],
    );
    assert!(ok, "{out}");
    let (ok, out) = weir(&broker, &["topics", "list"]);
    assert!(ok && out.contains("orders\t4"), "{out}");
    // A bootstrap list passes over an address where nothing listens, as Kafka's does.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let list = format!("{closed},{}", broker.bootstrap());
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["topics", "list", "--bootstrap", &list])
        .output()
        .expect("run weir");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("orders\t4"),
        "{out:?}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["topics", "list", "--bootstrap", &closed.to_string()])
        .output()
        .expect("run weir");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains(&closed.to_string()),
        "{text}"
    );
    produce_to_every_partition(&broker, "orders", 4);
    let (ok, out) = weir(&broker, &["topics", "describe", "orders"]);
    assert!(ok, "{out}");
    assert_eq!(
        out.lines().filter(|l| l.ends_with("\t0\t5")).count(),
        4,
        "each partition 0..5: {out}"
    );

    // A simple consumer's offsets, then a reset to earliest and to an explicit offset.
    let (ok, out) = weir(
        &broker,
        &[
            "groups",
            "reset-offsets",
            "g",
            "--topic",
            "orders",
            "--to-latest",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = weir(&broker, &["groups", "describe", "g"]);
    assert!(
        ok && out.contains("orders\t0\t5\t5\t0\t-"),
        "committed 5, lag 0: {out}"
    );
    let (ok, out) = weir(
        &broker,
        &[
            "groups",
            "reset-offsets",
            "g",
            "--topic",
            "orders",
            "--to-offset",
            "2",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = weir(&broker, &["groups", "describe", "g"]);
    assert!(
        ok && out.contains("orders\t3\t2\t5\t3\t-"),
        "committed 2, lag 3: {out}"
    );
    let (ok, out) = weir(&broker, &["groups", "list"]);
    assert!(ok && out.contains("g\tEmpty"), "{out}");

    // With a member in the group, a reset is refused and says why.
    let coordinator = broker.port + weir::metadata::placement::coordinator_slot("g", 2) as u16;
    let mut join = JoinGroupRequest::default();
    join.group_id = GroupId(StrBytes::from_static_str("g"));
    join.session_timeout_ms = 30_000;
    join.rebalance_timeout_ms = 30_000;
    join.protocol_type = StrBytes::from_static_str("consumer");
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    join.protocols = vec![protocol];
    let elsewhere = broker.port + (1 - weir::metadata::placement::coordinator_slot("g", 2) as u16);
    assert_eq!(
        call(&mut connect(elsewhere), &join, 7).error_code,
        ResponseError::NotCoordinator.code(),
        "the other shard is not g's coordinator"
    );
    let mut s = connect(coordinator);
    let first = call(&mut s, &join, 7);
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    join.member_id = first.member_id;
    let joined = call(&mut s, &join, 7);
    assert_eq!(joined.error_code, 0);
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(StrBytes::from_static_str("g"));
    sync.generation_id = joined.generation_id;
    sync.member_id = joined.member_id.clone();
    assert_eq!(call(&mut s, &sync, 5).error_code, 0);
    let (ok, out) = weir(
        &broker,
        &[
            "groups",
            "reset-offsets",
            "g",
            "--topic",
            "orders",
            "--to-earliest",
        ],
    );
    assert!(!ok && out.contains("active members"), "{out}");
    let (ok, out) = weir(&broker, &["groups", "describe", "g"]);
    assert!(ok && out.contains("Stable, 1 members"), "{out}");

    let (ok, out) = weir(&broker, &["topics", "delete", "orders"]);
    assert!(ok, "{out}");
    let (ok, out) = weir(&broker, &["topics", "create", "bad/name"]);
    assert!(!ok && out.contains("InvalidTopicException"), "{out}");
}

#[test]
fn topics_grow_and_records_are_deleted_from_the_command_line() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let (ok, out) = weir(&broker, &["topics", "create", "trim", "--partitions", "2"]);
    assert!(ok, "{out}");
    let (ok, out) = weir(
        &broker,
        &["topics", "add-partitions", "trim", "--partitions", "3"],
    );
    assert!(ok && out.contains("now has 3 partitions"), "{out}");
    let (ok, out) = weir(
        &broker,
        &["topics", "add-partitions", "trim", "--partitions", "2"],
    );
    assert!(
        !ok && out.contains("InvalidPartitions"),
        "shrinking refused: {out}"
    );
    produce_to_every_partition(&broker, "trim", 3);
    let (ok, out) = weir(
        &broker,
        &[
            "topics",
            "delete-records",
            "trim",
            "--partition",
            "2",
            "--before",
            "3",
        ],
    );
    assert!(ok && out.contains("log start offset 3"), "{out}");
    let (ok, out) = weir(&broker, &["topics", "describe", "trim"]);
    assert!(ok, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("2\t") && l.ends_with("\t3\t5")),
        "partition 2 now starts at 3: {out}"
    );
    let (ok, out) = weir(
        &broker,
        &[
            "topics",
            "delete-records",
            "trim",
            "--partition",
            "0",
            "--before",
            "-1",
        ],
    );
    assert!(
        ok && out.contains("log start offset 5"),
        "-1 is the high watermark: {out}"
    );
}

#[test]
fn topic_configs_are_checked_stored_applied_and_kept_across_a_restart() {
    use kafka_protocol::messages::{
        create_topics_request::{CreatableTopic, CreatableTopicConfig},
        CreateTopicsRequest,
    };
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("data"), 1, &[]);
    // Configs given at creation: one bad value refuses the topic, naming the key.
    let create = |configs: Vec<(&str, &str)>| {
        let mut t = CreatableTopic::default();
        t.name = TopicName(StrBytes::from_static_str("kept"));
        t.num_partitions = 1;
        t.replication_factor = 1;
        t.configs = configs
            .into_iter()
            .map(|(k, v)| {
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string(k.into()))
                    .with_value(Some(StrBytes::from_string(v.into())))
            })
            .collect();
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 5000;
        let r = call(&mut connect(broker.port), &req, 7);
        let t = &r.topics[0];
        (
            t.error_code,
            t.error_message.as_ref().map(|m| m.to_string()),
        )
    };
    let (code, message) = create(vec![("segment.bytes", "1048576"), ("retention.ms", "soon")]);
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert!(message.unwrap_or_default().contains("retention.ms"));
    assert_eq!(create(vec![("segment.bytes", "1048576")]).0, 0);
    let (ok, out) = weir(
        &broker,
        &[
            "topics",
            "create",
            "log",
            "--config",
            "cleanup.policy=compacted",
        ],
    );
    assert!(!ok && out.contains("cleanup.policy"), "{out}");
    let (ok, out) = weir(
        &broker,
        &[
            "topics",
            "create",
            "log",
            "--config",
            "cleanup.policy=compact,delete",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = weir(&broker, &["topics", "describe", "log"]);
    assert!(
        ok && out.contains("cleanup.policy\tcompact,delete"),
        "{out}"
    );

    let (ok, out) = weir(
        &broker,
        &["topics", "alter-config", "kept", "retention.hours=1"],
    );
    assert!(
        !ok && out.contains("InvalidConfig") && out.contains("retention.hours"),
        "{out}"
    );
    let (ok, out) = weir(
        &broker,
        &[
            "topics",
            "alter-config",
            "kept",
            "retention.ms=3600000",
            "max.message.bytes=2000000",
        ],
    );
    assert!(ok && out.contains("retention.ms=3600000"), "{out}");
    assert!(
        out.contains("segment.bytes=1048576"),
        "kept from creation: {out}"
    );
    let (ok, out) = weir(
        &broker,
        &[
            "topics",
            "alter-config",
            "kept",
            "--delete",
            "max.message.bytes",
        ],
    );
    assert!(ok && !out.contains("max.message.bytes"), "{out}");

    // Applied without a restart: four ~900 KB batches roll 1 MiB segments, and
    // retention.bytes then deletes the oldest within a retention check (1 s).
    for _ in 0..4 {
        assert_eq!(
            produce(broker.port, "kept", 0, build_batch(100, &[9u8; 9000], 0)).0,
            0
        );
    }
    let (ok, out) = weir(
        &broker,
        &["topics", "alter-config", "kept", "retention.bytes=1048576"],
    );
    assert!(ok, "{out}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, out) = weir(&broker, &["topics", "describe", "kept"]);
        if out
            .lines()
            .any(|l| l.starts_with("0\t") && !l.contains("\t0\t400"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "retention.bytes never applied: {out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }

    broker.stop();
    broker.restart();
    let (ok, out) = weir(&broker, &["topics", "describe", "kept"]);
    assert!(
        ok && out.contains("retention.bytes\t1048576"),
        "kept across a restart: {out}"
    );
    assert!(out.contains("segment.bytes\t1048576"), "{out}");
}

#[test]
fn the_binary_gives_jemalloc_the_brokers_options() {
    // jemalloc prints its options at exit when asked through the environment, which
    // adds to the options the binary exports (see weir::reserve_alloc::MALLOC_CONF).
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .expect("run weir");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("opt.oversize_threshold: 0\n"),
        "jemalloc did not take the exported options:\n{text}"
    );
}

#[test]
fn a_created_topics_partitions_are_opened_before_their_first_record() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let (ok, out) = weir(&broker, &["topics", "create", "eager", "--partitions", "6"]);
    assert!(ok, "{out}");
    // As Kafka creates a partition's log when its broker becomes the leader, each shard
    // opens the partitions placed on it in the background, so a first produce does not
    // wait for a new log's files.
    let log = |p: i32| {
        broker
            .data_dir
            .join(format!("eager-{p}"))
            .join("00000000000000000000.log")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !(0..6).all(|p| log(p).exists()) {
        assert!(
            std::time::Instant::now() < deadline,
            "partitions not opened without a record:\n{}",
            broker.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
