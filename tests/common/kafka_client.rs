//! Test shorthands over `weir_client`'s blocking client: calls that panic on failure,
//! raw streams for tests that also send malformed bytes, and one-line produce, fetch
//! and create calls.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use bytes::{Bytes, BytesMut};
use kafka_protocol::{
    messages::{
        create_topics_request::CreatableTopic,
        fetch_request::{FetchPartition, FetchTopic},
        produce_request::{PartitionProduceData, TopicProduceData},
        CreateTopicsRequest, FetchRequest, ProduceRequest, TopicName,
    },
    protocol::{Request, StrBytes},
};

/// Connects with a read timeout so a broker that never answers fails the test.
pub fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s
}

/// The correlation id every test request carries.
const CORRELATION_ID: i32 = 42;

/// One request as it goes on the wire (length prefix included), correlation id 42.
pub fn frame<R: Request>(request: &R, version: i16) -> Vec<u8> {
    let mut out = BytesMut::new();
    weir_client::frame::encode_request(&mut out, request, version, CORRELATION_ID, "weir-test")
        .expect("encode request");
    out.to_vec()
}

/// Sends `request` at `version` and returns its response.
pub fn call<R: Request>(stream: &mut TcpStream, request: &R, version: i16) -> R::Response {
    weir_client::blocking::call_on(stream, request, version, CORRELATION_ID, "weir-test")
        .expect("call")
}

/// True once the broker has closed `stream` (reads return end of file or an error).
pub fn closed(stream: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(stream.read(&mut b), Ok(0) | Err(_))
}

/// A topic name.
pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Creates `topic` with `partitions` partitions; returns the error code.
pub fn create(port: u16, topic: &str, partitions: i32) -> i16 {
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 5000;
    call(&mut connect(port), &req, 7).topics[0].error_code
}

/// A produce of `records` (RecordBatch bytes) to one partition, asking for `acks`.
pub fn produce_request(topic: &str, partition: i32, records: Vec<u8>, acks: i16) -> ProduceRequest {
    let mut p = PartitionProduceData::default();
    p.index = partition;
    p.records = Some(Bytes::from(records));
    let mut t = TopicProduceData::default();
    t.name = name(topic);
    t.partition_data = vec![p];
    let mut req = ProduceRequest::default();
    req.acks = acks;
    req.timeout_ms = 5000;
    req.topic_data = vec![t];
    req
}

/// Produces `records` (RecordBatch bytes) with acks=all; returns the error code and
/// base offset.
pub fn produce(port: u16, topic: &str, partition: i32, records: Vec<u8>) -> (i16, i64) {
    let r = call(
        &mut connect(port),
        &produce_request(topic, partition, records, -1),
        9,
    );
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Sends a produce of `records` with acks=0 (no response comes) on a new connection and
/// returns that connection.
pub fn produce_unacknowledged(
    port: u16,
    topic: &str,
    partition: i32,
    records: Vec<u8>,
) -> TcpStream {
    let mut stream = connect(port);
    let request = produce_request(topic, partition, records, 0);
    stream.write_all(&frame(&request, 9)).expect("send");
    stream
}

/// A fetch of one partition from `offset`, up to `max_bytes`, waiting up to 100 ms.
pub fn fetch_request(topic: &str, partition: i32, offset: i64, max_bytes: i32) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.fetch_offset = offset;
    p.partition_max_bytes = max_bytes;
    let mut t = FetchTopic::default();
    t.topic = name(topic);
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    req.max_wait_ms = 100;
    req.max_bytes = max_bytes;
    req.topics = vec![t];
    req
}

/// Fetches from `offset`; returns the error code, high watermark and records.
pub fn fetch(port: u16, topic: &str, partition: i32, offset: i64) -> (i16, i64, Bytes) {
    let req = fetch_request(topic, partition, offset, 1 << 20);
    let r = call(&mut connect(port), &req, 12);
    let d = &r.responses[0].partitions[0];
    (
        d.error_code,
        d.high_watermark,
        d.records.clone().unwrap_or_default(),
    )
}
