//! The reference peer's harness cannot rot: Apache Kafka 4.4.0, started from its Maven
//! jars by `benches/peers/kafka.sh` exactly as the side-by-side benchmark starts it,
//! serves a short loadgen run, and weir serves the same run. The measurements
//! themselves are `benches/peers/compare.sh`'s, on an idle machine, not here.

#[allow(dead_code)]
mod common;

use std::{
    net::SocketAddr,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{
    broker::{answers_api_versions, free_ports_on, Broker},
    loadgen::{loadgen, summary},
    scratch_dir,
};

/// A Kafka node started by the harness, killed on drop.
struct Kafka {
    child: Child,
    log: std::path::PathBuf,
}

impl Kafka {
    /// Starts a one-node Kafka (`profile`: default or durable) in `dir` on `port`, its
    /// controller on `port + 1`, and waits until it answers ApiVersions.
    fn start(dir: &Path, port: u16, profile: &str) -> Kafka {
        let log = dir.join("kafka.log");
        let out = std::fs::File::create(&log).expect("kafka log");
        let err = out.try_clone().expect("kafka log");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/kafka.sh");
        let child = Command::new("bash")
            .arg(script)
            .arg("start")
            .arg(dir.join("node1"))
            .args(["1", "127.0.0.1", &port.to_string(), &(port + 1).to_string()])
            .arg(format!("1@127.0.0.1:{}", port + 1))
            .arg(profile)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("start kafka");
        let mut kafka = Kafka { child, log };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(90);
        while !answers_api_versions(addr) {
            if let Ok(Some(status)) = kafka.child.try_wait() {
                panic!("kafka exited at start ({status}):\n{}", kafka.log());
            }
            assert!(
                Instant::now() < deadline,
                "kafka did not answer in 90 s:\n{}",
                kafka.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        kafka
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Kafka {
    fn drop(&mut self) {
        // The script execs the JVM, so the child is the broker itself.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two seconds of acks=all 1 KiB produce to 4 partitions at `bootstrap`; returns the
/// messages acknowledged, failing with `logs` if loadgen fails.
fn short_produce(bootstrap: &str, out: &Path, logs: impl FnOnce() -> String) -> u64 {
    let run = Command::new("timeout")
        .arg("120")
        .arg(loadgen())
        .args(["produce", "--bootstrap", bootstrap, "--topic", "smoke"])
        .args(["--partitions", "4", "--acks", "all", "--duration", "2s"])
        .arg("--out")
        .arg(out)
        .output()
        .expect("run loadgen");
    assert!(
        run.status.success(),
        "loadgen against {bootstrap}:\n{}{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
        logs()
    );
    summary(out)["produce"]["messages"]
        .as_u64()
        .expect("messages in summary.json")
}

#[test]
fn kafka_and_weir_both_start_and_serve_a_short_workload() {
    let dir = scratch_dir();
    let port = free_ports_on(&["127.0.0.1"], 2);
    let kafka = Kafka::start(dir.path(), port, "durable");
    let acked = short_produce(
        &format!("127.0.0.1:{port}"),
        &dir.path().join("kafka-run"),
        || format!("kafka log:\n{}", kafka.log()),
    );
    assert!(acked > 0, "kafka acknowledged nothing");
    drop(kafka);

    let broker = Broker::start(&dir.path().join("weir"), 1, &[]);
    let acked = short_produce(&broker.bootstrap(), &dir.path().join("weir-run"), || {
        format!("weir log:\n{}", broker.log())
    });
    assert!(acked > 0, "weir acknowledged nothing");
}
