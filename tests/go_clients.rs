//! The Go Kafka clients against a real weir: franz-go (kgo producer and consumer
//! groups, kadm admin) and IBM/sarama with its default settings, from the Go module in
//! `tests/go` (go.mod and go.sum committed), compiled into `target/go` by
//! `tests/run-all.sh`.

#[allow(dead_code)]
mod common;

use std::{path::PathBuf, process::Command};

use common::{broker::Broker, scratch_dir};

/// The compiled Go tests.
fn go_tests() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/go/gocompat.test");
    assert!(
        p.exists(),
        "{} is missing: run `bash tests/run-all.sh`, which builds tests/go",
        p.display()
    );
    p
}

#[test]
fn franz_go_and_sarama_work_against_one_host() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let out = Command::new("timeout")
        .arg("300")
        .arg(go_tests())
        .args(["-test.v", "-test.count=1"])
        .env("WEIR_BOOTSTRAP", broker.bootstrap())
        .output()
        .expect("run the Go tests");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "Go clients failed:\n{text}\nbroker log:\n{}",
        broker.log()
    );
    for test in [
        "TestFranzGoProducesEveryCodecAndAGroupConsumesAndCommits",
        "TestKadmManagesTopicsConfigsRecordsAndGroups",
        "TestFranzGoTransactionsCommitAbortFenceAndCopyExactlyOnce",
        "TestSaramaWithDefaultSettingsProducesConsumesAndAdministers",
    ] {
        assert!(
            text.contains(&format!("--- PASS: {test}")),
            "{test} did not pass:\n{text}"
        );
    }
}
