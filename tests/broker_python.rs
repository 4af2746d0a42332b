//! Python Kafka clients against the real broker: kafka-python 3 and confluent-kafka,
//! installed into `target/pyenv` by `tests/run-all.sh` at pinned versions.

#[allow(dead_code)]
mod common;

use std::{path::PathBuf, process::Command};

use common::{broker::Broker, scratch_dir};

fn python() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/pyenv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run `bash tests/run-all.sh`, which installs the Python clients",
        p.display()
    );
    p
}

fn run_script(script: &str, broker: &Broker, topic: &str, count: usize) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(script);
    let out = Command::new("timeout")
        .arg("120")
        .arg(python())
        .arg(&path)
        .args([broker.bootstrap(), topic.to_string(), count.to_string()])
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{script} failed:\n{}\n{}\nbroker log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        broker.log()
    );
    print!("{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn kafka_python_produces_idempotently_and_consumes() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    run_script("kafka_python_roundtrip.py", &broker, "kafka-python", 2000);
    assert!(
        broker.data_dir.join("producer_ids").exists(),
        "the producer asked for a producer id"
    );
}

#[test]
fn confluent_kafka_produces_idempotently_and_consumes() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    run_script("confluent_kafka_roundtrip.py", &broker, "confluent", 2000);
    assert!(
        broker.data_dir.join("producer_ids").exists(),
        "the producer asked for a producer id"
    );
}
