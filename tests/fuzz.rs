//! Mutation fuzzing on the stable toolchain: valid seeds (request frames of every API
//! and version range weir serves, record batches, index files) are mutated at random —
//! bit flips, random bytes, insertions, deletions, truncation, extreme lengths and
//! counts — and fed to the decoders the broker runs on untrusted bytes. Each target
//! runs for `WEIR_FUZZ_SECONDS` (default 3) and prints its seed and execution count;
//! `WEIR_FUZZ_SECONDS=600 cargo test --release --test fuzz -- --nocapture` runs it longer.
//! Not coverage-guided (cargo-fuzz needs nightly); a crash found here becomes a unit test
//! beside the decoder.

#[allow(dead_code)]
mod common;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::{
    kafka_client::{frame, name},
    mutation::{fuzz_seconds, mutate},
    rng::Rng,
};
use kafka_protocol::messages::{
    fetch_request::{FetchPartition, FetchTopic},
    metadata_request::MetadataRequestTopic,
    produce_request::{PartitionProduceData, TopicProduceData},
    AlterConfigsRequest, AlterUserScramCredentialsRequest, ApiKey, ApiVersionsRequest,
    CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteAclsRequest,
    DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeAclsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    DescribeUserScramCredentialsRequest, FetchRequest, FindCoordinatorRequest, HeartbeatRequest,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest,
    ListGroupsRequest, ListOffsetsRequest, MetadataRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest, ProduceRequest,
    RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::Decodable;
use weir::{
    api::{decode, session::Session, SecurityProtocol},
    net::frame::take_frame,
    security::{plain, scram_server::ServerExchange},
    storage::{
        record_batch::{check, BatchHeader},
        segment_index::{OffsetIndex, TimeIndex},
        ProducePayload,
    },
};
use weir_client::record_batch::{build_batch, build_idempotent_batch, Producer};

/// The broker's allocator, so a hostile array count is answered as in the broker
/// (reserved, not committed) instead of aborting the test process.
#[global_allocator]
static ALLOCATOR: weir::reserve_alloc::ReservingAllocator = weir::reserve_alloc::ReservingAllocator;

const FRAME_BYTES_MAX: usize = 1 << 20;

/// Runs `one` on mutations of the seeds for the configured time; returns executions.
fn fuzz(target: &str, seeds: &[Vec<u8>], mut one: impl FnMut(&[u8])) -> u64 {
    let seconds = fuzz_seconds();
    let mut rng = Rng::from_env(target);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut executions = 0u64;
    for seed in seeds {
        one(seed);
        executions += 1;
    }
    while Instant::now() < deadline {
        for _ in 0..64 {
            let seed = &seeds[rng.index(seeds.len())];
            let input = mutate(&mut rng, seed);
            one(&input);
            executions += 1;
        }
    }
    println!("{target}: {executions} executions in {seconds} s");
    executions
}

fn request_seeds() -> Vec<Vec<u8>> {
    let mut produce = ProduceRequest::default();
    produce.acks = -1;
    produce.timeout_ms = 1000;
    produce.topic_data = vec![TopicProduceData::default()
        .with_name(name("t"))
        .with_partition_data(vec![PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(Bytes::from(build_batch(3, b"value", 1))))])];
    let mut fetch = FetchRequest::default();
    fetch.max_bytes = 1 << 20;
    fetch.topics = vec![FetchTopic::default()
        .with_topic(name("t"))
        .with_partitions(vec![
            FetchPartition::default().with_partition_max_bytes(1 << 20)
        ])];
    let mut metadata = MetadataRequest::default();
    metadata.topics = Some(vec![
        MetadataRequestTopic::default().with_name(Some(name("t")))
    ]);
    let mut seeds = Vec::new();
    for v in [3, 7, 9] {
        seeds.push(frame(&produce, v));
    }
    for v in [4, 11, 12] {
        seeds.push(frame(&fetch, v));
    }
    for v in [0, 4, 9, 12] {
        seeds.push(frame(&metadata, v));
    }
    for v in [0, 3] {
        seeds.push(frame(&ApiVersionsRequest::default(), v));
    }
    seeds.push(frame(&ListOffsetsRequest::default(), 7));
    seeds.push(frame(&CreateTopicsRequest::default(), 7));
    seeds.push(frame(&DeleteTopicsRequest::default(), 5));
    seeds.push(frame(&CreatePartitionsRequest::default(), 3));
    seeds.push(frame(&OffsetForLeaderEpochRequest::default(), 4));
    seeds.push(frame(&OffsetDeleteRequest::default(), 0));
    seeds.push(frame(&DeleteRecordsRequest::default(), 2));
    seeds.push(frame(&AlterConfigsRequest::default(), 2));
    seeds.push(frame(&IncrementalAlterConfigsRequest::default(), 1));
    seeds.push(frame(&InitProducerIdRequest::default(), 4));
    seeds.push(frame(&DescribeConfigsRequest::default(), 4));
    seeds.push(frame(&DescribeClusterRequest::default(), 1));
    seeds.push(frame(&FindCoordinatorRequest::default(), 4));
    seeds.push(frame(&JoinGroupRequest::default(), 7));
    seeds.push(frame(&SyncGroupRequest::default(), 5));
    seeds.push(frame(&HeartbeatRequest::default(), 4));
    seeds.push(frame(&LeaveGroupRequest::default(), 4));
    seeds.push(frame(&OffsetCommitRequest::default(), 8));
    seeds.push(frame(&OffsetFetchRequest::default(), 8));
    seeds.push(frame(&ListGroupsRequest::default(), 4));
    seeds.push(frame(&DescribeGroupsRequest::default(), 5));
    seeds.push(frame(&DeleteGroupsRequest::default(), 2));
    for v in [0, 1] {
        seeds.push(frame(&SaslHandshakeRequest::default(), v));
    }
    for v in [0, 2] {
        seeds.push(frame(&SaslAuthenticateRequest::default(), v));
    }
    seeds.push(frame(&DescribeUserScramCredentialsRequest::default(), 0));
    seeds.push(frame(&AlterUserScramCredentialsRequest::default(), 0));
    for v in [1, 3] {
        seeds.push(frame(&CreateAclsRequest::default(), v));
        seeds.push(frame(&DescribeAclsRequest::default(), v));
        seeds.push(frame(&DeleteAclsRequest::default(), v));
    }
    seeds
}

/// Validates a Produce request's record batches as its handler would (the broker's
/// decoding has already accepted the body).
fn validate_produce_batches(frame: &[u8]) {
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let mut body = Bytes::copy_from_slice(frame);
    let header_version = ApiKey::Produce.request_header_version(version);
    if RequestHeader::decode(&mut body, header_version).is_err() {
        return;
    }
    if let Ok(produce) = ProduceRequest::decode(&mut body, version) {
        for data in produce.topic_data.iter().flat_map(|t| &t.partition_data) {
            if let Some(records) = &data.records {
                let _ = ProducePayload::validate(records.clone(), FRAME_BYTES_MAX);
            }
        }
    }
}

#[test]
fn request_framing_and_decoding() {
    let seeds = request_seeds();
    // A connection that needs no login, so every API's decoder is reached.
    let session = std::rc::Rc::new(Session::new(SecurityProtocol::Plaintext, None, false));
    let executions = fuzz("request framing and decoding", &seeds, |input| {
        // As sent, and with the length prefix repaired so that a mutated header or body
        // reaches the decoders instead of stopping at the framing.
        let mut repaired = input.to_vec();
        if repaired.len() >= 4 {
            let length = (repaired.len() - 4) as i32;
            repaired[..4].copy_from_slice(&length.to_be_bytes());
        }
        for bytes in [input, &repaired[..]] {
            // The connection's path: frames off a byte stream, then header, then body.
            let mut buf = BytesMut::from(bytes);
            let before = buf.len();
            while let Ok(Some(payload)) = take_frame(&mut buf, FRAME_BYTES_MAX) {
                assert!(payload.len() <= FRAME_BYTES_MAX);
                assert!(buf.len() + payload.len() + 4 <= before);
                // The broker's decoding: header, then body by the API's handler.
                let frame = payload.freeze();
                if let Ok(request) = decode(frame.clone(), &session) {
                    if request.key() == ApiKey::Produce {
                        validate_produce_batches(&frame);
                    }
                }
            }
        }
    });
    assert!(executions > 1000);
}

fn batch_seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![
        build_batch(1, b"", 0),
        build_batch(5, b"a value", 1_700_000_000_000),
        build_batch(100, &[7u8; 300], -1),
        build_idempotent_batch(
            3,
            b"idempotent",
            5,
            Producer {
                id: 42,
                epoch: 1,
                base_sequence: 7,
            },
        ),
    ];
    let mut two = build_batch(2, b"first", 1);
    two.extend(build_batch(4, b"second", 2));
    seeds.push(two);
    seeds
}

#[test]
fn record_batch_validation() {
    let seeds = batch_seeds();
    let executions = fuzz("record batch validation", &seeds, |input| {
        let bytes = Bytes::copy_from_slice(input);
        if let Ok(payload) = ProducePayload::validate(bytes.clone(), FRAME_BYTES_MAX) {
            // Whatever validates is whole, CRC-correct and consistent.
            assert_eq!(payload.total_bytes(), input.len());
            let mut at = 0;
            for batch in payload.batches() {
                let raw = batch.as_bytes();
                assert_eq!(raw, &input[at..at + raw.len()]);
                let stored = u32::from_be_bytes([raw[17], raw[18], raw[19], raw[20]]);
                assert_eq!(
                    stored,
                    crc32c::crc32c(&raw[21..]),
                    "CRC of a validated batch"
                );
                assert_eq!(
                    i64::from(batch.record_count()),
                    i64::from(batch.last_offset_delta()) + 1
                );
                at += raw.len();
            }
            assert_eq!(at, input.len());
        }
        if let Ok(size) = check(input, FRAME_BYTES_MAX) {
            assert!(size <= input.len());
            assert!(BatchHeader::parse(input).is_some());
        }
    });
    assert!(executions > 1000);
}

#[test]
fn segment_index_decoding() {
    let mut offsets = Vec::new();
    let mut times = Vec::new();
    for i in 1..200u32 {
        offsets.extend(i.to_be_bytes());
        offsets.extend((i * 4096).to_be_bytes());
        times.extend((1_700_000_000_000i64 + i64::from(i)).to_be_bytes());
        times.extend(i.to_be_bytes());
    }
    let mut padded = offsets.clone();
    padded.extend([0u8; 64]);
    let seeds = vec![offsets, times, padded];
    let executions = fuzz("segment index decoding", &seeds, |input| {
        let log_bytes = 1 << 20;
        let (index, _) = OffsetIndex::decode(input, log_bytes);
        let entries = index.entries();
        assert!(entries
            .windows(2)
            .all(|w| w[0].relative_offset < w[1].relative_offset && w[0].position < w[1].position));
        assert!(entries.iter().all(|e| u64::from(e.position) < log_bytes));
        let (time_index, _) = TimeIndex::decode(input, 1 << 30);
        assert_eq!(time_index.last_before(i64::MIN), None);
        if let Some(last) = time_index.last() {
            assert!(u64::from(last.relative_offset) < 1 << 30);
            if last.timestamp < i64::MAX {
                assert_eq!(time_index.last_before(last.timestamp + 1), Some(last));
            }
        }
    });
    assert!(executions > 1000);
}

#[test]
fn metrics_request_heads() {
    let seeds: Vec<Vec<u8>> = [
        &b"GET /metrics HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text"[..],
        b"HEAD /ready HTTP/1.0",
        b"POST /health HTTP/1.1\r\nContent-Length: 5",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect();
    let executions = fuzz("metrics request heads", &seeds, |input| {
        if let weir::metrics::http::Asked::Get { path, .. } = weir::metrics::http::parse_head(input)
        {
            assert!(path.starts_with('/'), "{path:?}");
        }
    });
    assert!(executions > 1000);
}

#[test]
fn batch_records_decoding() {
    use std::io::Write as _;
    let plain = build_batch(5, b"a value", 1_700_000_000_000);
    let mut gzip = plain[..61].to_vec();
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&plain[61..]).expect("gzip");
    gzip.extend(encoder.finish().expect("gzip"));
    gzip[22] = 1; // attributes: gzip
    let seeds = vec![plain, gzip];
    let executions = fuzz("batch records decoding", &seeds, |input| {
        // Mutations that keep a valid header: lengths and CRC repaired, as a client
        // could send them, so the record decoding itself is what gets the bytes.
        let mut batch = input.to_vec();
        if batch.len() < 61 {
            return;
        }
        let length = (batch.len() - 12) as i32;
        batch[8..12].copy_from_slice(&length.to_be_bytes());
        weir_client::record_batch::seal_crc(&mut batch);
        if let Ok((b, _)) = weir::storage::RecordBatch::validate(&batch, FRAME_BYTES_MAX) {
            if let Ok(times) = weir::storage::batch_records::record_times(&b) {
                assert_eq!(times.len() as u32, b.record_count());
            }
        }
    });
    assert!(executions > 1000);
}

/// SASL payloads as SaslAuthenticate carries them: PLAIN messages and SCRAM client-first
/// and client-final messages (the latter against a server-first the seed answered).
#[test]
fn sasl_payloads() {
    use weir::security::credentials::{ScramCredential, ScramHash};
    use weir_client::scram::{ClientExchange, Mechanism};
    let m = Mechanism::Sha256;
    let stored = ScramCredential::from_password(ScramHash::Sha256, "pw", 4096).expect("credential");
    let (mut client, first) = ClientExchange::start(m, "user", "pw").expect("client");
    let (_, server_first) =
        ServerExchange::start(m, &first, |_| Some(stored.clone())).expect("first");
    let last = client.answer(&server_first).expect("final");
    let seeds = vec![
        b"\0user\0pw".to_vec(),
        b"user\0user\0pw".to_vec(),
        first.clone(),
        b"y,,n=us=2Cer,r=abc,ext=1".to_vec(),
        last,
    ];
    let executions = fuzz("SASL payloads", &seeds, |input| {
        let _ = plain::parse(input);
        if let Ok((server, _)) = ServerExchange::start(m, input, |_| Some(stored.clone())) {
            let _ = server.finish(input);
        }
        // A real exchange's server-first, finished by the mutated bytes.
        if let Ok((server, _)) = ServerExchange::start(m, &first, |_| Some(stored.clone())) {
            let _ = server.finish(input);
        }
    });
    assert!(executions > 1000);
}
