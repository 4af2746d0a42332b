//! Bad and edge-case input to the real broker over TCP: malformed frames close only
//! their own connection, bad requests get Kafka's error codes, and nothing already
//! stored is lost.

#[allow(dead_code)]
mod common;

use std::io::Write;

use bytes::Bytes;
use common::{
    broker::Broker,
    kafka_client::{call, closed, connect, create, fetch, frame, name, produce, produce_request},
    scratch_dir,
};
use kafka_protocol::{
    messages::{
        produce_request::{PartitionProduceData, TopicProduceData},
        ApiVersionsRequest, InitProducerIdRequest, ProduceRequest,
    },
    protocol::StrBytes,
    ResponseError,
};
use weir_client::record_batch::{build_batch, build_idempotent_batch, Producer};

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// InitProducerId for a new producer of transactional id `id`, with a 60 s timeout.
fn init_transactional(id: &str) -> InitProducerIdRequest {
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(kafka_protocol::messages::TransactionalId(
        StrBytes::from_string(id.to_string()),
    ));
    init.transaction_timeout_ms = 60_000;
    init.producer_id = kafka_protocol::messages::ProducerId(-1);
    init.producer_epoch = -1;
    init
}

/// ListOffsets (latest, READ_COMMITTED) of partition 0 of `topic`: its last stable
/// offset.
fn last_stable_request(topic: &str) -> kafka_protocol::messages::ListOffsetsRequest {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let mut req = kafka_protocol::messages::ListOffsetsRequest::default();
    req.replica_id = kafka_protocol::messages::BrokerId(-1);
    req.isolation_level = 1;
    req.topics = vec![ListOffsetsTopic::default()
        .with_name(name(topic))
        .with_partitions(vec![ListOffsetsPartition::default()
            .with_partition_index(0)
            .with_timestamp(-1)])];
    req
}

/// EndTxn of `id`'s transaction: commit when `committed`, abort otherwise.
fn end_txn_request(
    id: &str,
    producer_id: kafka_protocol::messages::ProducerId,
    epoch: i16,
    committed: bool,
) -> kafka_protocol::messages::EndTxnRequest {
    let mut end = kafka_protocol::messages::EndTxnRequest::default();
    end.transactional_id =
        kafka_protocol::messages::TransactionalId(StrBytes::from_string(id.to_string()));
    end.producer_id = producer_id;
    end.producer_epoch = epoch;
    end.committed = committed;
    end
}

/// TxnOffsetCommit of `offset` for partition 0 of topic `in` in `group`, in `id`'s
/// transaction at `epoch`, from outside any generation.
fn txn_offset_commit_request(
    id: &str,
    group: &str,
    producer_id: kafka_protocol::messages::ProducerId,
    epoch: i16,
    offset: i64,
) -> kafka_protocol::messages::TxnOffsetCommitRequest {
    use kafka_protocol::messages::{
        txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic},
        GroupId, TransactionalId, TxnOffsetCommitRequest,
    };
    let mut commit = TxnOffsetCommitRequest::default();
    commit.transactional_id = TransactionalId(StrBytes::from_string(id.to_string()));
    commit.group_id = GroupId(StrBytes::from_string(group.to_string()));
    commit.producer_id = producer_id;
    commit.producer_epoch = epoch;
    commit.generation_id = -1;
    let mut p = TxnOffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    let mut t = TxnOffsetCommitRequestTopic::default();
    t.name = name("in");
    t.partitions = vec![p];
    commit.topics = vec![t];
    commit
}

/// OffsetFetch of partition 0 of topic `in` in `group`, asking for stable offsets
/// (UNSTABLE_OFFSET_COMMIT while some are pending in a transaction).
fn stable_offset_fetch_request(group: &str) -> kafka_protocol::messages::OffsetFetchRequest {
    use kafka_protocol::messages::{
        offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics},
        GroupId, OffsetFetchRequest,
    };
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(StrBytes::from_string(group.to_string()));
    let mut ft = OffsetFetchRequestTopics::default();
    ft.name = name("in");
    ft.partition_indexes = vec![0];
    g.topics = Some(vec![ft]);
    let mut fetch = OffsetFetchRequest::default();
    fetch.groups = vec![g];
    fetch.require_stable = true;
    fetch
}

/// An idempotent producer's id and epoch from the broker at `port`.
fn idempotent_producer(port: u16) -> Producer {
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = None;
    init.transaction_timeout_ms = 60_000;
    init.producer_id = kafka_protocol::messages::ProducerId(-1);
    init.producer_epoch = -1;
    let id = call(&mut connect(port), &init, 4);
    assert_eq!(id.error_code, 0, "InitProducerId");
    Producer {
        id: id.producer_id.0,
        epoch: id.producer_epoch,
        base_sequence: 0,
    }
}

#[test]
fn malformed_frames_close_only_their_connection() {
    let dir = scratch_dir();
    let broker = Broker::start(
        &dir.path().join("data"),
        2,
        &["--max-request-bytes", "65536"],
    );
    let frames: Vec<Vec<u8>> = vec![
        (-5i32).to_be_bytes().to_vec(),
        (1i32 << 30).to_be_bytes().to_vec(),
        [&8i32.to_be_bytes()[..], &[0x7f, 0x7f, 0, 0, 0, 0, 0, 1]].concat(),
        [&3i32.to_be_bytes()[..], &[1, 2, 3]].concat(),
        [
            &12i32.to_be_bytes()[..],
            &[0, 3, 0, 9, 0, 0, 0, 1, 0x7f, 0xff, 0, 0],
        ]
        .concat(),
        // Produce v2: below the versions this broker serves.
        [
            &10i32.to_be_bytes()[..],
            &[0, 0, 0, 2, 0, 0, 0, 1, 0xff, 0xff],
        ]
        .concat(),
        // Metadata v1 claiming 2^31-1 topics in 14 bytes: the decoder reserves room for
        // that many before reading one (see reserve_alloc); the broker must survive.
        [
            &14i32.to_be_bytes()[..],
            &[0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff],
        ]
        .concat(),
        // The same through a flexible version's varint count (Metadata v12, ~2^32).
        [
            &16i32.to_be_bytes()[..],
            &[
                0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xff, 0x0f,
            ],
        ]
        .concat(),
    ];
    let mut survivor = connect(broker.port);
    // A truncated frame: the length promises 100 bytes, 10 arrive, then the client
    // closes its side.
    let mut truncated = connect(broker.port);
    truncated
        .write_all(&[0, 0, 0, 100, 0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff])
        .expect("send");
    truncated
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    assert!(
        closed(&mut truncated),
        "a truncated frame ends its connection"
    );
    for frame in frames {
        let mut s = connect(broker.port);
        s.write_all(&frame).expect("send");
        assert!(closed(&mut s), "frame {frame:?} closes its connection");
        let versions = call(&mut survivor, &ApiVersionsRequest::default(), 3);
        assert_eq!(versions.error_code, 0, "other connections keep working");
    }
}

#[test]
fn api_versions_above_ours_get_unsupported_version() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let mut s = connect(broker.port);
    // ApiVersions v9 (a future client): flexible header v2 = key, version, correlation
    // id, null client id, no tagged fields. The answer is a v0 response with error 35.
    s.write_all(&[0, 0, 0, 11, 0, 18, 0, 9, 0, 0, 0, 5, 0xff, 0xff, 0])
        .expect("send");
    let mut resp = [0u8; 10];
    std::io::Read::read_exact(&mut s, &mut resp).expect("response");
    assert_eq!(&resp[4..8], &5i32.to_be_bytes(), "correlation id");
    assert_eq!(
        i16::from_be_bytes([resp[8], resp[9]]),
        code(ResponseError::UnsupportedVersion)
    );
}

#[test]
fn bad_requests_get_kafka_errors_and_lose_nothing() {
    let dir = scratch_dir();
    let broker = Broker::start(
        &dir.path().join("data"),
        2,
        &["--auto-create-topics", "false"],
    );
    let port = broker.port;
    assert_eq!(create(port, "t", 4), 0);
    assert_eq!(
        create(port, "t", 4),
        code(ResponseError::TopicAlreadyExists)
    );
    assert_eq!(
        create(port, "bad/name", 1),
        code(ResponseError::InvalidTopicException)
    );
    assert_eq!(
        create(port, "zero", 0),
        code(ResponseError::InvalidPartitions)
    );

    // Find a partition each shard owns by asking shard 0 for each partition.
    let good = build_batch(3, b"kept", 1000);
    let mut owned = None;
    let mut foreign = None;
    for p in 0..4 {
        match produce(port, "t", p, good.clone()).0 {
            0 => owned = owned.or(Some(p)),
            e if e == code(ResponseError::NotLeaderOrFollower) => foreign = foreign.or(Some(p)),
            e => panic!("unexpected error {e} for partition {p}"),
        }
    }
    let owned = owned.expect("shard 0 owns a partition of a 4-partition topic");
    assert!(
        foreign.is_some(),
        "shard 1 owns one too, and shard 0 refuses it"
    );

    let mut bad_crc = good.clone();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 1;
    assert_eq!(
        produce(port, "t", owned, bad_crc).0,
        code(ResponseError::CorruptMessage)
    );
    let mut bad_magic = good.clone();
    bad_magic[16] = 1;
    assert_eq!(
        produce(port, "t", owned, bad_magic).0,
        code(ResponseError::UnsupportedForMessageFormat)
    );
    let huge = build_batch(1, &vec![7u8; 2 << 20], 0);
    assert_eq!(
        produce(port, "t", owned, huge).0,
        code(ResponseError::MessageTooLarge)
    );
    assert_eq!(
        produce(port, "t", 99, good.clone()).0,
        code(ResponseError::UnknownTopicOrPartition)
    );
    assert_eq!(
        produce(port, "t", -1, good.clone()).0,
        code(ResponseError::UnknownTopicOrPartition)
    );
    assert_eq!(
        produce(port, "nope", 0, good.clone()).0,
        code(ResponseError::UnknownTopicOrPartition)
    );

    let (error, hw, records) = fetch(port, "t", owned, 0);
    assert_eq!((error, hw), (0, 3), "only the good batch was stored");
    assert_eq!(&records[16..], &good[16..]);
    assert_eq!(
        fetch(port, "t", owned, 4).0,
        code(ResponseError::OffsetOutOfRange)
    );
    assert_eq!(
        produce(port, "t", owned, good).1,
        3,
        "the next good batch follows densely"
    );
}

#[test]
fn idle_connections_are_closed_and_busy_ones_kept() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &["--idle-timeout", "300ms"]);
    let mut idle = connect(broker.port);
    let mut busy = connect(broker.port);
    for _ in 0..8 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(
            call(&mut busy, &ApiVersionsRequest::default(), 3).error_code,
            0
        );
    }
    assert!(closed(&mut idle), "silent for 800 ms with a 300 ms timeout");
}

#[test]
fn unanswered_request_bytes_are_bounded_by_back_pressure() {
    // A 5 s group commit keeps each acks=all produce unanswered until the flush; with a
    // 64 KiB budget the shard must stop reading after one ~1 MB request instead of
    // buffering (and, at 16 MiB dirty, flushing early and acknowledging) what the
    // client keeps sending.
    let dir = scratch_dir();
    let broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--inflight-bytes", "65536", "--flush-interval", "5s"],
    );
    let port = broker.port;
    assert_eq!(create(port, "bp", 1), 0);
    let mut p = PartitionProduceData::default();
    p.index = 0;
    p.records = Some(Bytes::from(build_batch(1000, &[1u8; 1000], 0)));
    let mut t = TopicProduceData::default();
    t.name = name("bp");
    t.partition_data = vec![p];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 5000;
    req.topic_data = vec![t];
    let one = frame(&req, 9);
    let mut s = connect(port);
    s.set_write_timeout(Some(std::time::Duration::from_secs(2)))
        .expect("timeout");
    let mut written = 0usize;
    while written < 256 << 20 {
        if s.write_all(&one).is_err() {
            break;
        }
        written += one.len();
    }
    assert!(
        written < 32 << 20,
        "the shard stops reading after its 64 KiB budget (plus socket buffers); it took {written} bytes"
    );
    let mut other = connect(port);
    assert_eq!(
        call(&mut other, &ApiVersionsRequest::default(), 3).error_code,
        0,
        "others are still served"
    );
}

#[test]
fn a_retried_idempotent_batch_is_stored_once() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let port = broker.port;
    assert_eq!(create(port, "idem", 1), 0);
    let producer = idempotent_producer(port);
    let batch = |seq| {
        build_idempotent_batch(
            4,
            b"once",
            0,
            Producer {
                base_sequence: seq,
                ..producer
            },
        )
    };
    assert_eq!(produce(port, "idem", 0, batch(0)), (0, 0));
    assert_eq!(
        produce(port, "idem", 0, batch(0)),
        (0, 0),
        "the retry gets the original offset"
    );
    assert_eq!(
        produce(port, "idem", 0, batch(9)).0,
        code(ResponseError::OutOfOrderSequenceNumber)
    );
    assert_eq!(produce(port, "idem", 0, batch(4)), (0, 4));
    assert_eq!(
        fetch(port, "idem", 0, 0).1,
        8,
        "two batches stored, not three"
    );
    // Five batches later the first is older than any the partition remembers: a retry
    // of it (its first send went to a leader cut off meanwhile) is stored already, as
    // DUPLICATE_SEQUENCE_NUMBER says, which clients take as success; nothing is added.
    for seq in [8, 12, 16, 20, 24] {
        assert_eq!(produce(port, "idem", 0, batch(seq)), (0, i64::from(seq)));
    }
    assert_eq!(
        produce(port, "idem", 0, batch(0)).0,
        code(ResponseError::DuplicateSequenceNumber)
    );
    assert_eq!(fetch(port, "idem", 0, 0).1, 28, "seven batches stored");
}

#[test]
fn transactional_requests_out_of_order_get_kafkas_errors_and_store_nothing() {
    use kafka_protocol::messages::{
        add_partitions_to_txn_request::AddPartitionsToTxnTopic, AddPartitionsToTxnRequest,
        FindCoordinatorRequest, ProducerId, TransactionalId,
    };
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let port = broker.port;
    assert_eq!(create(port, "tx", 1), 0);
    let id = TransactionalId(StrBytes::from_static_str("tx-id"));
    let mut find = FindCoordinatorRequest::default();
    find.key = StrBytes::from_static_str("tx-id");
    find.key_type = 1;
    let found = call(&mut connect(port), &find, 3);
    assert_eq!((found.error_code, found.port), (0, i32::from(port)));

    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(TransactionalId(StrBytes::from_static_str("")));
    init.transaction_timeout_ms = 60_000;
    assert_eq!(
        call(&mut connect(port), &init, 4).error_code,
        code(ResponseError::InvalidRequest),
        "an empty transactional id, as Kafka answers it"
    );
    init.transactional_id = Some(id.clone());
    init.transaction_timeout_ms = 3_600_000;
    init.producer_id = ProducerId(-1);
    init.producer_epoch = -1;
    assert_eq!(
        call(&mut connect(port), &init, 4).error_code,
        code(ResponseError::InvalidTransactionTimeout)
    );
    init.transaction_timeout_ms = 60_000;
    let first = call(&mut connect(port), &init, 4);
    assert_eq!((first.error_code, first.producer_epoch), (0, 0));
    let again = call(&mut connect(port), &init, 4);
    assert_eq!(
        (again.producer_id, again.producer_epoch),
        (first.producer_id, 1),
        "the same id, the next epoch"
    );

    let end = end_txn_request(id.0.as_str(), again.producer_id, 1, true);
    assert_eq!(
        call(&mut connect(port), &end, 3).error_code,
        code(ResponseError::InvalidTxnState),
        "nothing open"
    );
    let mut add = AddPartitionsToTxnRequest::default();
    add.v3_and_below_transactional_id = id.clone();
    add.v3_and_below_producer_id = again.producer_id;
    add.v3_and_below_producer_epoch = 0;
    let mut topic = AddPartitionsToTxnTopic::default();
    topic.name = name("tx");
    topic.partitions = vec![0];
    add.v3_and_below_topics = vec![topic];
    let partition_code = |answer: kafka_protocol::messages::AddPartitionsToTxnResponse| {
        answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    };
    assert_eq!(
        partition_code(call(&mut connect(port), &add, 3)),
        code(ResponseError::ProducerFenced),
        "the epoch before the bump"
    );
    assert_eq!(
        partition_code(call(&mut connect(port), &add, 1)),
        code(ResponseError::InvalidProducerEpoch),
        "as versions before KIP-588 say it"
    );
    add.v3_and_below_producer_epoch = 1;
    add.v3_and_below_producer_id = ProducerId(again.producer_id.0 + 1);
    assert_eq!(
        partition_code(call(&mut connect(port), &add, 3)),
        code(ResponseError::InvalidProducerIdMapping)
    );

    // A client's control batch is refused and nothing is stored.
    let marker = weir_client::record_batch::control_batch(again.producer_id.0, 1, true, 0, 0);
    assert_eq!(
        produce(port, "tx", 0, marker.to_vec()).0,
        code(ResponseError::InvalidRecord)
    );
    assert_eq!(fetch(port, "tx", 0, 0).1, 0, "nothing stored");
}

#[test]
fn record_lists_larger_than_a_segment_and_invalid_names_in_metadata_are_refused() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &["--segment-bytes", "65536"]);
    let port = broker.port;
    assert_eq!(create(port, "small", 1), 0);
    let many: Vec<u8> = (0..40)
        .flat_map(|_| build_batch(2, &[3u8; 1000], 0))
        .collect();
    assert!(many.len() > 65536);
    assert_eq!(
        produce(port, "small", 0, many).0,
        code(ResponseError::RecordListTooLarge)
    );
    assert_eq!(fetch(port, "small", 0, 0).1, 0, "nothing stored");

    let mut t = kafka_protocol::messages::metadata_request::MetadataRequestTopic::default();
    t.name = Some(name("no such/topic"));
    let mut req = kafka_protocol::messages::MetadataRequest::default();
    req.topics = Some(vec![t]);
    req.allow_auto_topic_creation = true;
    let r = call(&mut connect(port), &req, 12);
    assert_eq!(
        r.topics[0].error_code,
        code(ResponseError::InvalidTopicException)
    );
}

#[test]
fn deleted_topics_lose_their_data_and_can_be_created_again() {
    let dir = scratch_dir();
    let broker = Broker::start(
        &dir.path().join("data"),
        2,
        &["--auto-create-topics", "false"],
    );
    let port = broker.port;
    assert_eq!(create(port, "gone", 1), 0);
    let owner_port = (0..2u16)
        .map(|s| port + s)
        .find(|&p| produce(p, "gone", 0, build_batch(2, b"x", 0)).0 == 0)
        .expect("one shard owns the partition");
    let partition_dir = broker.data_dir.join("gone-0");
    assert!(partition_dir.exists());
    let mut req = kafka_protocol::messages::DeleteTopicsRequest::default();
    req.topic_names = vec![name("gone")];
    req.timeout_ms = 5000;
    let r = call(&mut connect(port), &req, 5);
    assert_eq!(r.responses[0].error_code, 0);
    let r = call(&mut connect(port), &req, 5);
    assert_eq!(
        r.responses[0].error_code,
        code(ResponseError::UnknownTopicOrPartition)
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while partition_dir.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the owning shard deletes the data"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        produce(owner_port, "gone", 0, build_batch(1, b"y", 0)).0,
        code(ResponseError::UnknownTopicOrPartition)
    );
    assert_eq!(create(port, "gone", 1), 0);
    assert_eq!(
        fetch(owner_port, "gone", 0, 0).1,
        0,
        "a recreated topic starts empty"
    );
}

#[test]
fn simple_consumer_commits_and_batched_offset_fetch() {
    use kafka_protocol::messages::{
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics},
        GroupId, OffsetCommitRequest, OffsetFetchRequest,
    };
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let port = broker.port;
    let commit = |group: &str, offset: i64| {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = 0;
        p.committed_offset = offset;
        let mut t = OffsetCommitRequestTopic::default();
        t.name = name("t");
        t.partitions = vec![p];
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(StrBytes::from_string(group.to_string()));
        req.generation_id_or_member_epoch = -1;
        req.topics = vec![t];
        call(&mut connect(port), &req, 8).topics[0].partitions[0].error_code
    };
    assert_eq!(
        commit("g-a", 42),
        0,
        "a group without members takes simple commits"
    );
    assert_eq!(commit("g-a", 7), 0, "and resets backwards");
    let group = |id: &str| {
        let mut g = OffsetFetchRequestGroup::default();
        g.group_id = GroupId(StrBytes::from_string(id.to_string()));
        let mut t = OffsetFetchRequestTopics::default();
        t.name = name("t");
        t.partition_indexes = vec![0];
        g.topics = Some(vec![t]);
        g
    };
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![group("g-a"), group("g-b")];
    let r = call(&mut connect(port), &req, 8);
    let offsets: Vec<i64> = r
        .groups
        .iter()
        .map(|g| g.topics[0].partitions[0].committed_offset)
        .collect();
    assert_eq!(
        offsets,
        vec![7, -1],
        "each group answered in one batched request"
    );
}

#[test]
fn segments_past_retention_bytes_are_deleted_by_the_broker() {
    let dir = scratch_dir();
    let broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--segment-bytes", "65536", "--retention-bytes", "131072"],
    );
    let port = broker.port;
    assert_eq!(create(port, "kept-short", 1), 0);
    let batch = build_batch(4, &[9u8; 4000], 0);
    for _ in 0..40 {
        assert_eq!(produce(port, "kept-short", 0, batch.clone()).0, 0);
    }
    let deadline = std::time::Instant::now()
        + weir::shard::context::RETENTION_CHECK_INTERVAL
        + std::time::Duration::from_secs(10);
    // The broker logs the deletion after the files are gone; offset 0 stops being
    // readable a little earlier, so wait for the log line.
    while !broker.log().contains("deleted segments past retention") {
        assert!(
            std::time::Instant::now() < deadline,
            "no segment deleted: retention did not run"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(
        fetch(port, "kept-short", 0, 0).0,
        code(ResponseError::OffsetOutOfRange),
        "offset 0 is still readable"
    );
    let (error, high_watermark, _) = fetch(port, "kept-short", 0, 159);
    assert_eq!((error, high_watermark), (0, 160), "the newest data is kept");
    let segments = std::fs::read_dir(broker.data_dir.join("kept-short-0"))
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "log"))
            })
            .count()
        })
        .unwrap_or(0);
    assert!((1..=4).contains(&segments), "{segments} segments left");
}

#[test]
fn offset_for_leader_epoch_ends_epoch_0_at_the_log_end() {
    use kafka_protocol::messages::{
        offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic},
        BrokerId, OffsetForLeaderEpochRequest,
    };
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    assert_eq!(create(broker.port, "epochs", 1), 0);
    for _ in 0..3 {
        assert_eq!(
            produce(broker.port, "epochs", 0, build_batch(4, b"e", 0)).0,
            0
        );
    }
    let ask = |partition: i32, current: i32, epoch: i32| {
        let mut req = OffsetForLeaderEpochRequest::default();
        req.replica_id = BrokerId(-1);
        req.topics = vec![OffsetForLeaderTopic::default()
            .with_topic(name("epochs"))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(current)
                .with_leader_epoch(epoch)])];
        let r = call(&mut connect(broker.port), &req, 4);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.leader_epoch, p.end_offset)
    };
    assert_eq!(
        ask(0, 0, 0),
        (0, 0, 12),
        "epoch 0, the current one, ends at the log end"
    );
    assert_eq!(
        ask(0, -1, 0),
        (0, 0, 12),
        "no current epoch given: no check"
    );
    assert_eq!(ask(0, 0, 3), (0, -1, -1), "an epoch weir never had");
    assert_eq!(
        ask(0, 5, 0).0,
        ResponseError::UnknownLeaderEpoch.code(),
        "the client knows a newer leader"
    );
    assert_eq!(
        ask(9, 0, 0).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

#[test]
fn a_fetch_from_the_wrong_shard_names_the_leader() {
    use common::kafka_client::fetch_request;
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    assert_eq!(create(broker.port, "led", 2), 0);
    let placed = weir::metadata::placement::place(&[0, 1], "led", 0..2);
    // Ask each partition of the shard that does not hold it.
    for (p, node) in placed.iter().enumerate() {
        let wrong = broker.port + (1 - *node as u16);
        let r = call(
            &mut connect(wrong),
            &fetch_request("led", p as i32, 0, 1024),
            12,
        );
        let d = &r.responses[0].partitions[0];
        assert_eq!(d.error_code, code(ResponseError::NotLeaderOrFollower));
        assert_eq!(
            (d.current_leader.leader_id.0, d.current_leader.leader_epoch),
            (*node, 0),
            "v12 answers carry the current leader"
        );
    }
}

/// A second `weir serve` on a port a running broker holds stops at start (glommio's
/// own bind set SO_REUSEPORT, and two brokers shared the port, each taking part of the
/// connections); after the broker stops, another server binds the port at once although
/// its connections sit in TIME_WAIT (the listener sets SO_REUSEADDR, as Kafka's does).
#[test]
fn a_taken_port_stops_a_second_broker_and_a_stopped_one_frees_it_at_once() {
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("a"), 1, &[]);
    let mut c = connect(broker.port);
    call(&mut c, &ApiVersionsRequest::default(), 3);
    let out = std::process::Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--config", common::broker::SHARED_PROFILE])
        .args(["--listen", &broker.bootstrap(), "--shards", "1"])
        .args(["--metrics-listen", "off"])
        .arg("--data-dir")
        .arg(dir.path().join("b"))
        .output()
        .expect("run weir");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second broker started on the port");
    assert!(
        stderr.contains("Address already in use"),
        "the refusal says why:\n{stderr}"
    );
    call(&mut c, &ApiVersionsRequest::default(), 3);
    drop(c);
    broker.stop();
    // The server side closed first, so its side of the connection is in TIME_WAIT.
    std::net::TcpListener::bind(("127.0.0.1", broker.port))
        .expect("another server binds the port of a stopped broker");
}

/// Transactions V2 over the wire (Produce v12, EndTxn v5, no AddPartitionsToTxn): each
/// EndTxn ends its transaction at the next epoch, a retried EndTxn of the epoch just
/// ended gets the same answer, and a delayed one cannot end the next transaction
/// (KAFKA-17754, which V1 allows).
#[test]
fn transactions_v2_end_each_transaction_at_a_new_epoch_and_a_delayed_end_ends_nothing() {
    use kafka_protocol::messages::TransactionalId;
    use weir_client::record_batch::BatchBuilder;
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let port = broker.port;
    assert_eq!(create(port, "tx2", 1), 0);
    let id = TransactionalId(StrBytes::from_static_str("tx2-id"));
    let first = call(&mut connect(port), &init_transactional("tx2-id"), 4);
    assert_eq!((first.error_code, first.producer_epoch), (0, 0));
    let pid = first.producer_id;
    // The partition may be led by the other shard than the coordinator: ask its leader.
    let leader = |topic: &str| {
        let mut m = kafka_protocol::messages::MetadataRequest::default();
        m.topics = Some(vec![
            kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                .with_name(Some(name(topic))),
        ]);
        let answer = call(&mut connect(port), &m, 12);
        let node = answer.topics[0].partitions[0].leader_id;
        answer
            .brokers
            .iter()
            .find(|b| b.node_id == node)
            .map(|b| b.port as u16)
            .expect("leader")
    };
    let data_port = leader("tx2");
    let produce_v12 = |epoch: i16, value: &[u8]| {
        let mut b = BatchBuilder::new(256, 0)
            .transactional()
            .producer(Producer {
                id: pid.0,
                epoch,
                base_sequence: 0,
            });
        b.push(0, Some(b"k"), value);
        let mut req = produce_request("tx2", 0, b.finish().to_vec(), -1);
        req.transactional_id = Some(id.clone());
        let r = call(&mut connect(data_port), &req, 12);
        let p = &r.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    };
    let end = |epoch: i16, committed: bool| {
        let r = call(
            &mut connect(port),
            &end_txn_request("tx2-id", pid, epoch, committed),
            5,
        );
        (r.error_code, r.producer_epoch)
    };
    let last_stable = || {
        call(&mut connect(data_port), &last_stable_request("tx2"), 7).topics[0].partitions[0].offset
    };

    // The partition joins the transaction with its first batch.
    assert_eq!(produce_v12(0, b"first"), (0, 0));
    assert_eq!(last_stable(), 0, "open");
    assert_eq!(end(0, true), (0, 1), "committed; go on at epoch 1");
    assert_eq!(end(0, true), (0, 1), "a retry gets the same answer");
    assert_eq!(last_stable(), 2, "the record and its marker");
    // The next transaction, at epoch 1: a zombie of epoch 0 and a delayed EndTxn of
    // epoch 0 change nothing.
    assert_eq!(produce_v12(1, b"second"), (0, 2));
    assert_eq!(
        produce_v12(0, b"zombie").0,
        code(ResponseError::InvalidProducerEpoch)
    );
    assert_eq!(end(0, true).0, code(ResponseError::ProducerFenced));
    assert_eq!(last_stable(), 2, "the second transaction is still open");
    // The first transaction's marker (epoch 1) again, as a coordinator that resent it
    // after a timeout would: it belongs to the transaction before the one open.
    let late = weir::txn::markers::request(
        weir::storage::partition_log::Marker {
            producer: weir::ids::ProducerIdentity::new(pid.0, 1),
            commit: true,
            coordinator_epoch: weir::ids::CoordinatorEpoch(0),
            ends: weir::storage::partition_log::MarkerEnds::BeforeItsEpoch,
        },
        &[("tx2".to_string(), 0)],
    );
    let answer = call(&mut connect(data_port), &late, 1);
    assert_eq!(
        answer.markers[0].topics[0].partitions[0].error_code,
        code(ResponseError::InvalidProducerEpoch),
        "as Kafka refuses a TV2 marker no later than the producer's epoch"
    );
    assert_eq!(last_stable(), 2, "the second transaction is still open");
    // Markers for a group coordinator slot go to its coordinator only: shard 0 holds
    // slot 0 of this two-shard host, not slot 1, and refuses to end what it cannot see.
    let slot_marker = |slot: u32| {
        let marker = weir::txn::markers::request(
            weir::storage::partition_log::Marker {
                producer: weir::ids::ProducerIdentity::new(pid.0, 1),
                commit: false,
                coordinator_epoch: weir::ids::CoordinatorEpoch(0),
                ends: weir::storage::partition_log::MarkerEnds::BeforeItsEpoch,
            },
            &[("__consumer_offsets".to_string(), slot)],
        );
        call(&mut connect(port), &marker, 1).markers[0].topics[0].partitions[0].error_code
    };
    assert_eq!(slot_marker(0), 0);
    assert_eq!(slot_marker(1), code(ResponseError::NotCoordinator));
    assert_eq!(end(1, false), (0, 2), "aborted; go on at epoch 2");
    // EndTxn answers once the decision is durable, as Kafka's does; the marker follows.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while last_stable() != 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the abort marker never came"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn an_idempotent_producer_silent_past_its_expiration_is_forgotten() {
    use kafka_protocol::messages::{
        describe_producers_request::TopicRequest, DescribeProducersRequest,
    };
    let dir = scratch_dir();
    let broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--producer-id-expiration", "2s"],
    );
    let port = broker.port;
    assert_eq!(create(port, "idle-producer", 1), 0);
    let producer = idempotent_producer(port);
    let batch = |seq| {
        build_idempotent_batch(
            1,
            b"v",
            0,
            Producer {
                base_sequence: seq,
                ..producer
            },
        )
    };
    let known = || {
        let mut d = DescribeProducersRequest::default();
        let mut t = TopicRequest::default();
        t.name = name("idle-producer");
        t.partition_indexes = vec![0];
        d.topics = vec![t];
        let answer = call(&mut connect(port), &d, 0);
        answer.topics[0].partitions[0].active_producers.len()
    };
    assert_eq!(produce(port, "idle-producer", 0, batch(0)), (0, 0));
    assert_eq!(known(), 1);
    assert_eq!(
        produce(port, "idle-producer", 0, batch(5)).0,
        code(ResponseError::OutOfOrderSequenceNumber),
        "a gap is refused while the producer is remembered"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while known() != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the producer is still remembered\n{}",
            broker.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // Forgotten, it is new again: its next batch is taken at whatever sequence it has.
    assert_eq!(produce(port, "idle-producer", 0, batch(5)), (0, 1));
}

#[test]
fn a_transactional_id_idle_past_its_expiration_is_forgotten_and_an_open_one_is_kept() {
    use kafka_protocol::messages::{
        add_partitions_to_txn_request::AddPartitionsToTxnTopic, AddPartitionsToTxnRequest,
        DescribeTransactionsRequest, TransactionalId,
    };
    let dir = scratch_dir();
    let broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--transactional-id-expiration", "2s"],
    );
    let port = broker.port;
    assert_eq!(create(port, "expiry", 1), 0);
    let init = |id: &'static str| {
        let answer = call(&mut connect(port), &init_transactional(id), 4);
        assert_eq!(answer.error_code, 0, "InitProducerId {id}");
        answer.producer_id
    };
    let idle = init("idle");
    let busy = init("busy");
    let mut add = AddPartitionsToTxnRequest::default();
    add.v3_and_below_transactional_id = TransactionalId(StrBytes::from_static_str("busy"));
    add.v3_and_below_producer_id = busy;
    add.v3_and_below_producer_epoch = 0;
    let mut topic = AddPartitionsToTxnTopic::default();
    topic.name = name("expiry");
    topic.partitions = vec![0];
    add.v3_and_below_topics = vec![topic];
    let added = call(&mut connect(port), &add, 3);
    assert_eq!(
        added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    // (state name, error code) of each id, as kafka-transactions.sh describe sees them.
    let describe = || {
        let mut d = DescribeTransactionsRequest::default();
        d.transactional_ids = vec![
            TransactionalId(StrBytes::from_static_str("idle")),
            TransactionalId(StrBytes::from_static_str("busy")),
        ];
        call(&mut connect(port), &d, 0)
            .transaction_states
            .iter()
            .map(|s| (s.transaction_state.to_string(), s.error_code))
            .collect::<Vec<_>>()
    };
    assert_eq!(describe()[0], ("Empty".to_string(), 0));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let not_found = code(ResponseError::TransactionalIdNotFound);
    while describe()[0].1 != not_found {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle id is still known: {:?}\n{}",
            describe(),
            broker.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // Idle past the expiration too, but with a transaction open: kept.
    assert_eq!(describe()[1], ("Ongoing".to_string(), 0));
    // The forgotten id starts afresh, under a new producer id.
    assert_ne!(init("idle"), idle);
}

#[test]
fn a_zombies_txn_offset_commit_after_its_transaction_was_fenced_is_refused_and_stores_nothing() {
    use kafka_protocol::messages::{AddOffsetsToTxnRequest, GroupId, TransactionalId};
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let port = broker.port;
    assert_eq!(create(port, "in", 1), 0);
    let id = TransactionalId(StrBytes::from_static_str("zombie-id"));
    // InitProducerId until it is answered (CONCURRENT_TRANSACTIONS while a fenced
    // transaction is being aborted).
    let init = || {
        let init = init_transactional("zombie-id");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let answer = call(&mut connect(port), &init, 4);
            if answer.error_code == 0 {
                return (answer.producer_id, answer.producer_epoch);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "InitProducerId: {}",
                answer.error_code
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    let (pid, zombie_epoch) = init();
    let mut add = AddOffsetsToTxnRequest::default();
    add.transactional_id = id.clone();
    add.producer_id = pid;
    add.producer_epoch = zombie_epoch;
    add.group_id = GroupId(StrBytes::from_static_str("copier"));
    assert_eq!(call(&mut connect(port), &add, 3).error_code, 0);
    // A new instance of the producer fences the first: its transaction is aborted at a
    // bumped epoch, markers and all.
    let (again, epoch) = init();
    assert_eq!(again, pid);
    assert!(epoch > zombie_epoch);
    // The zombie's offsets arrive late: refused, and not left pending for the new
    // instance's next COMMIT to apply.
    let commit = txn_offset_commit_request("zombie-id", "copier", pid, zombie_epoch, 5);
    let answer = call(&mut connect(port), &commit, 3);
    assert_eq!(
        answer.topics[0].partitions[0].error_code,
        code(ResponseError::ProducerFenced)
    );
    let answer = call(&mut connect(port), &commit, 2);
    assert_eq!(
        answer.topics[0].partitions[0].error_code,
        code(ResponseError::InvalidProducerEpoch),
        "as versions before KIP-588 say it"
    );
    let fetched = call(
        &mut connect(port),
        &stable_offset_fetch_request("copier"),
        8,
    );
    let partition = &fetched.groups[0].topics[0].partitions[0];
    assert_eq!(
        (partition.error_code, partition.committed_offset),
        (0, -1),
        "nothing committed, nothing pending"
    );
}

#[test]
fn the_next_transaction_enrolled_right_after_end_txn_waits_for_the_markers_instead_of_failing() {
    use kafka_protocol::messages::{
        add_partitions_to_txn_request::AddPartitionsToTxnTopic, AddPartitionsToTxnRequest,
        TransactionalId,
    };
    use weir_client::record_batch::BatchBuilder;
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let port = broker.port;
    assert_eq!(create(port, "tx3", 1), 0);
    let id = TransactionalId(StrBytes::from_static_str("tx3-id"));
    let producer = call(&mut connect(port), &init_transactional("tx3-id"), 4);
    assert_eq!((producer.error_code, producer.producer_epoch), (0, 0));
    let pid = producer.producer_id;
    let mut add = AddPartitionsToTxnRequest::default();
    add.v3_and_below_transactional_id = id.clone();
    add.v3_and_below_producer_id = pid;
    add.v3_and_below_producer_epoch = 0;
    let mut topic = AddPartitionsToTxnTopic::default();
    topic.name = name("tx3");
    topic.partitions = vec![0];
    add.v3_and_below_topics = vec![topic];
    let added = |conn: &mut std::net::TcpStream| {
        call(conn, &add, 3).results_by_topic_v3_and_below[0].results_by_partition[0]
            .partition_error_code
    };
    // One connection, as a producer has: each answer comes before the next request.
    let mut conn = connect(port);
    assert_eq!(added(&mut conn), 0);
    let mut b = BatchBuilder::new(256, 0)
        .transactional()
        .producer(Producer {
            id: pid.0,
            epoch: 0,
            base_sequence: 0,
        });
    b.push(0, Some(b"k"), b"v");
    let mut req = produce_request("tx3", 0, b.finish().to_vec(), -1);
    req.transactional_id = Some(id.clone());
    let r = call(&mut conn, &req, 9);
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let end = end_txn_request("tx3-id", pid, 0, true);
    assert_eq!(call(&mut conn, &end, 3).error_code, 0);
    // EndTxn answered once decided; the next transaction's enrolment, sent at once,
    // waits for the markers (Kafka would answer CONCURRENT_TRANSACTIONS to retry)...
    assert_eq!(added(&mut conn), 0, "not CONCURRENT_TRANSACTIONS");
    // ...so the first transaction is complete when it is answered.
    assert_eq!(
        call(&mut conn, &last_stable_request("tx3"), 7).topics[0].partitions[0].offset,
        2,
        "the record and its COMMIT marker"
    );
}

#[test]
fn a_marker_delayed_from_the_previous_v2_transaction_leaves_the_next_ones_offsets_pending() {
    use kafka_protocol::messages::{
        write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic},
        WriteTxnMarkersRequest,
    };
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 1, &[]);
    let port = broker.port;
    assert_eq!(create(port, "in", 1), 0);
    let producer = call(&mut connect(port), &init_transactional("late-id"), 4);
    assert_eq!((producer.error_code, producer.producer_epoch), (0, 0));
    let pid = producer.producer_id;
    // Transactions V2: TxnOffsetCommit v5 enrols the group itself.
    let commit_offset = |epoch: i16, offset: i64| {
        let commit = txn_offset_commit_request("late-id", "late", pid, epoch, offset);
        call(&mut connect(port), &commit, 5).topics[0].partitions[0].error_code
    };
    let end = |epoch: i16| {
        let r = call(
            &mut connect(port),
            &end_txn_request("late-id", pid, epoch, true),
            5,
        );
        (r.error_code, r.producer_epoch)
    };
    // (error, offset) of the group's partition, asking for stable offsets.
    let fetched = || {
        let answer = call(&mut connect(port), &stable_offset_fetch_request("late"), 8);
        let p = &answer.groups[0].topics[0].partitions[0];
        (p.error_code, p.committed_offset)
    };
    let until = |want: (i16, i64)| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while fetched() != want {
            assert!(std::time::Instant::now() < deadline, "{:?}", fetched());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };

    assert_eq!(commit_offset(0, 5), 0);
    assert_eq!(end(0), (0, 1), "committed; go on at epoch 1");
    until((0, 5));
    assert_eq!(commit_offset(1, 9), 0, "the next transaction's offsets");
    // The first transaction's marker (epoch 1) arrives again, late, as one its
    // coordinator resent after a timeout would; an ABORT, to drop what it ends.
    let mut marker = WritableTxnMarker::default();
    marker.producer_id = pid;
    marker.producer_epoch = 1;
    marker.transaction_result = false;
    let mut slots = WritableTxnMarkerTopic::default();
    slots.name = name("__consumer_offsets");
    // A single host of one shard has one coordinator slot.
    slots.partition_indexes = vec![0];
    marker.topics = vec![slots];
    let mut late = WriteTxnMarkersRequest::default();
    late.markers = vec![marker];
    let answer = call(&mut connect(port), &late, 1);
    assert!(answer.markers[0].topics[0]
        .partitions
        .iter()
        .all(|p| p.error_code == 0));
    assert_eq!(
        fetched(),
        (code(ResponseError::UnstableOffsetCommit), -1),
        "still pending in the open transaction, not dropped"
    );
    assert_eq!(end(1), (0, 2));
    until((0, 9));
}
