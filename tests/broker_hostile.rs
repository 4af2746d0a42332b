//! Hostile input to a live broker: random byte strings as frames, and well-framed
//! requests for every API and version the broker advertises whose bodies are random or
//! truncated. After each case the broker must still answer ApiVersions, and at the end
//! a normal produce and fetch must work. Seeded; the failing case is printed.

#[allow(dead_code)]
mod common;

use std::{
    io::{Read, Write},
    time::Duration,
};

use bytes::Bytes;
use common::{
    broker::Broker,
    kafka_client::{call, connect},
    scratch_dir,
};
use kafka_protocol::messages::ApiVersionsRequest;
use proptest::{prelude::*, test_runner::TestRunner};
use weir::api::ROUTES;

/// Sends `frame` on a fresh connection and reads whatever comes back, briefly.
fn poke(port: u16, frame: &[u8]) {
    let mut s = connect(port);
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let _ = s.write_all(frame);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 4096];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

fn alive(port: u16) -> bool {
    call(&mut connect(port), &ApiVersionsRequest::default(), 3).error_code == 0
}

/// A request frame: header v1 or v2 for `key`/`version`, then `body`.
fn request(key: i16, version: i16, flexible: bool, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&key.to_be_bytes());
    r.extend_from_slice(&version.to_be_bytes());
    r.extend_from_slice(&7i32.to_be_bytes());
    r.extend_from_slice(&(-1i16).to_be_bytes());
    if flexible {
        r.push(0);
    }
    r.extend_from_slice(body);
    let mut frame = (r.len() as i32).to_be_bytes().to_vec();
    frame.extend(r);
    frame
}

fn extreme_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        // Huge or negative counts and lengths where arrays and strings begin.
        proptest::collection::vec(
            prop_oneof![Just(0xffu8), Just(0x7f), Just(0x80), Just(0)],
            0..24
        ),
        (any::<i32>(), proptest::collection::vec(any::<u8>(), 0..16)).prop_map(|(n, rest)| [
            n.to_be_bytes().to_vec(),
            rest
        ]
        .concat()),
    ]
}

#[test]
fn random_and_extreme_requests_never_take_the_broker_down() {
    let dir = scratch_dir();
    let broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--max-request-bytes", "1048576"],
    );
    let port = broker.port;
    let config = ProptestConfig {
        cases: 3000,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let apis: Vec<(i16, i16, i16)> = ROUTES
        .iter()
        .map(|r| (r.key as i16, r.version_min, r.version_max))
        .collect();
    let case = (
        0..apis.len(),
        any::<u16>(),
        any::<bool>(),
        extreme_body(),
        proptest::collection::vec(any::<u8>(), 0..40),
    );
    let result = runner.run(&case, |(api, v, flexible, body, raw)| {
        let (key, lo, hi) = apis[api];
        let version = lo + (v % (hi - lo + 1) as u16) as i16;
        poke(port, &request(key, version, flexible, &body));
        let raw_frame = [(raw.len() as i32).to_be_bytes().to_vec(), raw].concat();
        poke(port, &raw_frame);
        prop_assert!(
            alive(port),
            "broker stopped answering after API {key} v{version} body {body:?}; log:\n{}",
            broker.log()
        );
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Normal service afterwards.
    let topic = "after-the-storm";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "topics",
            "create",
            topic,
            "--bootstrap",
            &broker.bootstrap(),
        ])
        .output()
        .expect("weir topics create");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let batch = weir_client::record_batch::build_batch(3, b"still here", 0);
    let mut p = kafka_protocol::messages::produce_request::PartitionProduceData::default();
    p.index = 0;
    p.records = Some(Bytes::from(batch));
    let mut t = kafka_protocol::messages::produce_request::TopicProduceData::default();
    t.name = kafka_protocol::messages::TopicName(
        kafka_protocol::protocol::StrBytes::from_static_str(topic),
    );
    t.partition_data = vec![p];
    let mut req = kafka_protocol::messages::ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 5000;
    req.topic_data = vec![t];
    let r = call(&mut connect(port), &req, 9);
    assert_eq!(
        r.responses[0].partition_responses[0].error_code, 0,
        "a normal produce works"
    );
}
