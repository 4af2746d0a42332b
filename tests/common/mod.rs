//! Shared helpers for the integration tests: executors, scratch directories on the
//! project disk, batch builders, a reader that walks a whole log, and the real broker
//! process ([`broker`]). Each test binary uses a part of them.

pub mod broker;
pub mod cluster;
pub mod interop;
pub mod jvm;
pub mod kafka_client;
pub mod loadgen;
pub mod loop_mount;
pub mod mutation;
pub mod netns;
pub mod partitions;
pub mod pki;
pub mod rng;
pub mod rss;
pub mod slow_disk;

use std::{future::Future, path::Path, time::Duration};

use bytes::Bytes;
use glommio::{LocalExecutorBuilder, Placement};
use weir::storage::{
    record_batch::BatchHeader, Clock, FlushConfig, FlushMode, LogConfig, Offset, PartitionLog,
    ProducePayload, ShardStorage, ShardStorageConfig,
};
use weir_client::record_batch::build_batch;

/// Runs `fut` on a fresh glommio executor on this thread.
pub fn run<T: 'static>(fut: impl Future<Output = T> + 'static) -> T {
    LocalExecutorBuilder::new(Placement::Unbound)
        .make()
        .expect("executor")
        .run(fut)
}

/// The environment variable `name` parsed as a `T`, or `default` when unset or invalid.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A scratch directory under `target/test-data` (ext4, not tmpfs), removed on drop
/// unless `WEIR_KEEP_TEST_DATA` is set (to read a failed test's logs and files).
pub fn scratch_dir() -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-data");
    std::fs::create_dir_all(&base).expect("create target/test-data");
    tempfile::Builder::new()
        .disable_cleanup(std::env::var_os("WEIR_KEEP_TEST_DATA").is_some())
        .tempdir_in(base)
        .expect("tempdir")
}

/// Flush settings for tests: durable, short interval.
pub fn fsync_every(interval: Duration) -> FlushConfig {
    FlushConfig {
        interval,
        dirty_bytes_max: 64 << 20,
        mode: FlushMode::Fsync,
        target_p99: None,
    }
}

/// Starts shard storage in `dir` with `flush` and a cache of `cache_bytes_max`.
pub async fn start(
    dir: &Path,
    flush: FlushConfig,
    cache_bytes_max: usize,
    clock: Clock,
) -> ShardStorage {
    ShardStorage::start(
        ShardStorageConfig {
            data_dir: dir.to_path_buf(),
            flush,
            cache_bytes_max,
            metrics: Default::default(),
            recycle: Default::default(),
        },
        clock,
    )
    .await
    .expect("start shard storage")
}

/// A small-segment log configuration so tests roll often.
pub fn small_segments(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 1024,
        write_chunk_bytes_max: 64 << 10,
        ..LogConfig::default()
    }
}

/// One produce payload of `batches` batches, each of `records` records whose values are
/// `value_len` bytes derived from `seed`.
pub fn payload(
    batches: usize,
    records: u32,
    value_len: usize,
    seed: u64,
    ts: i64,
) -> ProducePayload {
    let mut bytes = Vec::new();
    for b in 0..batches {
        let value: Vec<u8> = (0..value_len)
            .map(|i| (seed as usize).wrapping_mul(131).wrapping_add(b * 7 + i) as u8)
            .collect();
        bytes.extend(build_batch(records, &value, ts + b as i64));
    }
    ProducePayload::validate(Bytes::from(bytes), 1 << 24).expect("valid payload")
}

/// Appends `payload` and waits until it is durable; returns its base offset.
pub async fn append_durably(log: &PartitionLog, payload: &ProducePayload) -> Offset {
    let appended = log.append(payload, 0).await.expect("append");
    appended.durable.await.expect("durable");
    appended.base_offset
}

/// A stored batch as read back: its base offset and its bytes after the 16-byte prefix
/// the broker rewrites (identical to what the producer sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBatch {
    pub base_offset: u64,
    pub last_offset: u64,
    pub suffix: Bytes,
}

/// Splits fetched bytes into batches, checking each one's CRC and header.
pub fn split_batches(records: &Bytes) -> Vec<StoredBatch> {
    let mut out = Vec::new();
    let mut rest = records.clone();
    while !rest.is_empty() {
        let h = BatchHeader::parse(&rest).expect("header");
        let size = weir::storage::record_batch::check(&rest, usize::MAX).expect("intact batch");
        out.push(StoredBatch {
            base_offset: h.base_offset as u64,
            last_offset: h.last_offset() as u64,
            suffix: rest.slice(16..size),
        });
        rest = rest.slice(size..);
    }
    out
}

/// Every batch from the log start to the high watermark, read `max_bytes` at a time.
pub async fn read_all(log: &PartitionLog, max_bytes: usize) -> Vec<StoredBatch> {
    let offsets = log.offsets();
    let mut at = offsets.log_start;
    let mut out: Vec<StoredBatch> = Vec::new();
    while at < offsets.high_watermark {
        let read = log.read(at, max_bytes).await.expect("read");
        let batches = split_batches(&read.records);
        assert!(
            !batches.is_empty(),
            "read at {at} below the high watermark returned nothing"
        );
        for b in batches {
            if let Some(prev) = out.last() {
                assert_eq!(b.base_offset, prev.last_offset + 1, "offsets are dense");
            }
            at = Offset(b.last_offset + 1);
            out.push(b);
        }
    }
    out
}

/// Runs `command` with `input` on its standard input (none when `None`) and returns its
/// output; panics, naming `what`, if it cannot be started.
pub fn run_with_input(
    command: &mut std::process::Command,
    input: Option<&[u8]>,
    what: &str,
) -> std::process::Output {
    use std::{io::Write, process::Stdio};
    let mut child = command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    if let Some(bytes) = input {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(bytes)
            .expect("write stdin");
    }
    child.wait_with_output().expect("wait")
}

/// Runs kcat with `args` and `input` on its standard input; returns whether it
/// succeeded and everything it printed (for tests that expect refusals too).
pub fn kcat_try(args: &[&str], input: Option<&str>) -> (bool, String) {
    let out = run_with_input(
        std::process::Command::new("timeout")
            .arg("60")
            .arg("kcat")
            .args(args),
        input.map(str::as_bytes),
        "kcat (installed by tests/run-all.sh)",
    );
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Runs kcat (installed by `tests/run-all.sh`) with `args` and `input` on its standard
/// input; returns what it printed, failing with its error output if it fails.
pub fn kcat(args: &[&str], input: Option<&str>) -> String {
    let out = run_with_input(
        std::process::Command::new("timeout")
            .arg("60")
            .arg("kcat")
            .args(args),
        input.map(str::as_bytes),
        "kcat (installed by tests/run-all.sh)",
    );
    assert!(
        out.status.success(),
        "kcat {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Sends SIGTERM to `child` and waits for it to exit: its status, or `None` if it was
/// still running after `within` (it is then killed).
pub fn terminate(
    child: &mut std::process::Child,
    within: Duration,
) -> Option<std::process::ExitStatus> {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
