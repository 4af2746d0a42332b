//! A full disk under the running broker: produce fails with KAFKA_STORAGE_ERROR, nothing
//! acknowledged is lost, and once space is freed the broker reopens the partition and
//! takes produce again without a restart. Skips, saying why, where it cannot mount.

#[allow(dead_code)]
mod common;

use bytes::Bytes;
use common::{
    broker::Broker,
    kafka_client::{call, connect},
    loop_mount::mount_small_ext4,
    scratch_dir,
};
use kafka_protocol::{
    messages::{
        fetch_request::{FetchPartition, FetchTopic},
        produce_request::{PartitionProduceData, TopicProduceData},
        FetchRequest, ProduceRequest, TopicName,
    },
    protocol::StrBytes,
    ResponseError,
};
use weir_client::record_batch::build_batch;

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("full"))
}

fn produce(port: u16, records: Vec<u8>) -> i16 {
    let mut p = PartitionProduceData::default();
    p.index = 0;
    p.records = Some(Bytes::from(records));
    let mut t = TopicProduceData::default();
    t.name = topic();
    t.partition_data = vec![p];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 5000;
    req.topic_data = vec![t];
    call(&mut connect(port), &req, 9).responses[0].partition_responses[0].error_code
}

fn high_watermark(port: u16) -> i64 {
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.partition_max_bytes = 1024;
    let mut t = FetchTopic::default();
    t.topic = topic();
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    req.max_bytes = 1024;
    req.topics = vec![t];
    call(&mut connect(port), &req, 12).responses[0].partitions[0].high_watermark
}

#[test]
fn a_full_disk_fails_produce_loses_nothing_and_recovers_when_space_is_freed() {
    let dir = scratch_dir();
    let mount = match mount_small_ext4(dir.path(), 32) {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot mount a loop ext4 image here ({why})");
            return;
        }
    };
    let filler = mount.0.join("filler");
    std::fs::write(&filler, vec![7u8; 6 << 20]).expect("filler");
    let broker = Broker::start(&mount.0.join("data"), 1, &["--auto-create-topics", "false"]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "topics",
            "create",
            "full",
            "--bootstrap",
            &broker.bootstrap(),
        ])
        .output()
        .expect("create topic");
    assert!(out.status.success());
    let batch = build_batch(60, &[1u8; 1000], 0);
    let mut acked = 0i64;
    let error = loop {
        match produce(broker.port, batch.clone()) {
            0 => acked += 60,
            e => break e,
        }
        assert!(acked < 100_000, "a 32 MiB disk fills up");
    };
    assert_eq!(error, ResponseError::KafkaStorageError.code());
    assert!(acked > 60 * 100, "{acked} records fit first");
    assert!(
        high_watermark(broker.port) >= acked,
        "everything acknowledged is readable"
    );
    std::fs::remove_file(&filler).expect("free space");
    std::thread::sleep(std::time::Duration::from_millis(1200));
    assert_eq!(
        produce(broker.port, batch),
        0,
        "the partition was reopened and takes writes again"
    );
    assert!(high_watermark(broker.port) >= acked + 60);
    drop(broker);
    drop(mount);
}
