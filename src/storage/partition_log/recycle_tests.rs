//! Recycled segment files on real files: retention hands segments to the shard's pool,
//! new segments overwrite them, and neither a crash with a recycled active segment nor
//! a recycle stopped at any file-system step (failpoints, as a crash would stop it)
//! loses a durable batch or lets a stale byte be read.

use std::collections::BTreeMap;

use weir_client::record_batch::build_batch;

use super::{clean_close, *};
use crate::{
    metrics::StorageMetrics,
    storage::{
        failpoint,
        record_batch::RecordBatch,
        segment_pool::RecycleConfig,
        shard_storage::ShardStorageConfig,
        test_support::{run, test_dir},
        Clock, FlushConfig, ShardStorage,
    },
};
use bytes::Bytes;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10,
        retention_bytes_max: Some(48 << 10),
        ..LogConfig::default()
    }
}

async fn start(dir: &Path, metrics: StorageMetrics) -> ShardStorage {
    ShardStorage::start(
        ShardStorageConfig {
            data_dir: dir.join("shard-0"),
            flush: FlushConfig {
                interval: std::time::Duration::ZERO,
                ..FlushConfig::default()
            },
            cache_bytes_max: 0,
            metrics,
            recycle: RecycleConfig {
                bytes_max: 1 << 20,
                delete_rate: 0,
            },
        },
        Clock::System,
    )
    .await
    .expect("start")
}

async fn open(storage: &ShardStorage, dir: &Path, topic: &str) -> PartitionLog {
    storage
        .open_log(&dir.join(format!("{topic}-0")), config())
        .await
        .expect("open")
        .0
}

/// Reopens a log [`open`] made, with what recovery reported for its last (active)
/// segment.
async fn open_reporting(
    storage: &ShardStorage,
    dir: &Path,
    topic: &str,
) -> (PartitionLog, RecoveryReport) {
    let (log, mut reports) = storage
        .open_log(&dir.join(format!("{topic}-0")), config())
        .await
        .expect("open");
    let report = reports.pop().expect("a report for the active segment");
    (log, report)
}

/// What a stored batch must read back as: everything but its base offset and leader
/// epoch, which the log assigns.
fn identity(batch: &[u8]) -> Vec<u8> {
    let mut id = batch[8..12].to_vec();
    id.extend_from_slice(&batch[16..]);
    id
}

/// Appends `n` durable batches of two ~1 KiB records (each batch's bytes its own),
/// enforcing retention after each; returns base offset → identity.
async fn write(log: &PartitionLog, seed: u64, n: u64) -> BTreeMap<u64, Vec<u8>> {
    let mut written = BTreeMap::new();
    for i in 0..n {
        let fill = (seed * 1000 + i) as u8 | 1;
        let bytes = build_batch(2, &[fill; 1000], (seed * 1000 + i) as i64);
        let payload = ProducePayload::validate(Bytes::from(bytes.clone()), 1 << 20).expect("valid");
        let appended = log.append(&payload, 0).await.expect("append");
        written.insert(appended.base_offset.0, identity(&bytes));
        appended.durable.await.expect("durable");
        log.enforce_retention().await.expect("retention");
    }
    written
}

/// Every batch from the log start to the high watermark, checking that offsets are
/// dense; base offset → identity.
pub(super) async fn read_all(log: &PartitionLog) -> BTreeMap<u64, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut next = log.log_start_offset().0;
    while next < log.high_watermark().0 {
        let read = log.read(Offset(next), 1 << 20).await.expect("read");
        let mut rest: &[u8] = &read.records;
        assert!(
            !rest.is_empty(),
            "a read below the high watermark returns batches"
        );
        while !rest.is_empty() {
            let (batch, tail) = RecordBatch::validate_stored(rest, 1 << 20).expect("intact");
            assert_eq!(batch.base_offset() as u64, next, "dense");
            out.insert(next, identity(&rest[..batch.len()]));
            next += batch.offset_count();
            rest = tail;
        }
    }
    out
}

/// The entries of `written` from `start` on.
fn from(written: &BTreeMap<u64, Vec<u8>>, start: u64) -> BTreeMap<u64, Vec<u8>> {
    written
        .range(start..)
        .map(|(k, v)| (*k, v.clone()))
        .collect()
}

/// Asserts that the log reads back exactly the entries of `written` from its start
/// offset on; `context` names the case on failure.
async fn assert_holds(log: &PartitionLog, written: &BTreeMap<u64, Vec<u8>>, context: &str) {
    let expected = from(written, log.log_start_offset().0);
    assert_eq!(read_all(log).await, expected, "{context}");
}

#[test]
fn deleted_segments_are_reused_and_a_crash_reads_no_stale_byte() {
    let dir = test_dir();
    let root = dir.path().to_path_buf();
    let written = run({
        let root = root.clone();
        async move {
            let metrics = StorageMetrics::default();
            let storage = start(&root, metrics.clone()).await;
            let log = open(&storage, &root, "t").await;
            let written = write(&log, 1, 120).await;
            assert!(
                metrics.recycled_segments.get() >= 5,
                "segments reuse retired files: {}",
                metrics.recycled_segments.get()
            );
            let start = log.log_start_offset().0;
            assert!(start > 0, "retention ran");
            assert_eq!(read_all(&log).await, from(&written, start));
            // The active segment overwrites a file that still holds older batches past
            // its data: what a crash now leaves for recovery.
            let active = log
                .shared
                .state
                .borrow()
                .segments
                .back()
                .map(|s| (s.paths.log.clone(), s.size()));
            let (path, size) = active.expect("active segment");
            let on_disk = std::fs::read(&path).expect("read active");
            assert!(
                on_disk[size as usize..].iter().any(|&b| b != 0),
                "stale bytes past the data ({} of {} bytes are data)",
                size,
                on_disk.len()
            );
            written
            // Dropped without closing: a crash.
        }
    });
    run(async move {
        let storage = start(&root, StorageMetrics::default()).await;
        let log = open(&storage, &root, "t").await;
        let start = log.log_start_offset().0;
        let end = *written.keys().last().expect("written") + 2;
        assert_eq!(log.high_watermark().0, end, "every durable batch is back");
        assert_eq!(read_all(&log).await, from(&written, start));
        // Appends continue after the recovered end, and a clean reopen agrees.
        let more = write(&log, 2, 30).await;
        log.close().await.expect("close");
        let log = open(&storage, &root, "t").await;
        let mut all = written;
        all.extend(more);
        assert_holds(&log, &all, "a clean reopen after the recovery").await;
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn files_stay_in_their_partition_and_go_only_above_every_offset_they_held() {
    let dir = test_dir();
    run(async move {
        let metrics = StorageMetrics::default();
        let storage = start(dir.path(), metrics.clone()).await;
        let high = open(&storage, dir.path(), "high").await;
        write(&high, 3, 60).await;
        assert!(storage.pool().files() > 0, "retention kept files");
        let before = metrics.recycled_segments.get();
        // A new partition starts at offset 0, below every kept file's batches, and
        // never takes another partition's files.
        let low = open(&storage, dir.path(), "low").await;
        let low_written = write(&low, 4, 10).await;
        assert_eq!(
            read_all(&low).await,
            from(&low_written, low.log_start_offset().0)
        );
        assert_eq!(
            metrics.recycled_segments.get(),
            before,
            "no file crossed partitions"
        );
        let high_dir = dir.path().join("high-0");
        assert!(
            storage
                .pool()
                .take(&high_dir, Offset(0), 16 << 10)
                .is_none(),
            "none below the offsets a file held"
        );
        let of_high = |storage: &ShardStorage| {
            let paths = storage.pool().paths();
            paths.iter().filter(|p| p.starts_with(&high_dir)).count()
        };
        let kept = of_high(&storage);
        let end = high.offsets().log_end;
        assert!(storage.pool().take(&high_dir, end, 16 << 10).is_some());
        // Closing forgets a partition's files; opening takes in what is on disk again
        // (the file taken above was never claimed, so it is still there).
        high.close().await.expect("close");
        assert_eq!(of_high(&storage), 0);
        let high = open(&storage, dir.path(), "high").await;
        assert_eq!(of_high(&storage), kept);
        low.close().await.expect("close");
        high.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn retired_index_files_are_zeroed_and_reused() {
    use std::os::unix::fs::MetadataExt;
    let dir = test_dir();
    run(async move {
        let storage = start(dir.path(), StorageMetrics::default()).await;
        let log = open(&storage, dir.path(), "t").await;
        let inode = |p: &Path| std::fs::metadata(p).expect("stat").ino();
        let first = log
            .shared
            .state
            .borrow()
            .segments
            .front()
            .map(|s| s.paths.clone());
        let first = first.expect("a segment");
        let first = [inode(&first.index), inode(&first.time_index)];
        let written = write(&log, 6, 60).await;
        assert!(log.log_start_offset().0 > 0, "retention ran");
        let part = dir.path().join("t-0");
        let mut recycled = 0;
        let mut inodes = Vec::new();
        for entry in std::fs::read_dir(&part).expect("list") {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            if name.ends_with("index") {
                inodes.push(inode(&path));
            }
            if name.ends_with(".recycled-index") || name.ends_with(".recycled-timeindex") {
                let bytes = std::fs::read(&path).expect("read");
                assert!(bytes.iter().all(|&b| b == 0), "{name} holds only zeros");
                recycled += 1;
            }
        }
        assert!(recycled > 0, "index files wait in the pool");
        assert!(
            first.iter().all(|i| inodes.contains(i)),
            "the first segment's index files live on, pooled or under a later segment's name: {first:?} in {inodes:?} {:?}", std::fs::read_dir(&part).expect("list").map(|e| e.expect("e").file_name()).collect::<Vec<_>>()
        );
        // Sealed at close, the segments' index files hold their entries, then only
        // zeros, which a reopen takes as they are.
        log.close().await.expect("close");
        let (log, reports) = storage.open_log(&part, config()).await.expect("open");
        assert!(
            reports
                .iter()
                .all(|r| !r.index_rebuilt && !r.indexes_rewritten),
            "{reports:?}"
        );
        let segments: Vec<_> = log
            .shared
            .state
            .borrow()
            .segments
            .iter()
            .map(|s| {
                (
                    s.paths.clone(),
                    s.index().offsets().encode(),
                    s.index().times().encode(),
                )
            })
            .collect();
        for (paths, offsets, times) in segments {
            for (path, entries) in [(&paths.index, offsets), (&paths.time_index, times)] {
                let bytes = std::fs::read(path).expect("read");
                assert!(bytes.starts_with(&entries), "{}", path.display());
                assert!(
                    bytes[entries.len()..].iter().all(|&b| b == 0),
                    "{}",
                    path.display()
                );
            }
        }
        assert_holds(&log, &written, "a clean reopen with recycled index files").await;
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn a_recycle_stopped_at_any_step_loses_nothing() {
    for step in [
        "recycle zero indexes",
        "recycle move indexes",
        "recycle rename log",
        "recycle claim",
    ] {
        // Crash right where the step failed, or after later retentions retried it.
        for crash_at_once in [true, false] {
            stop_a_recycle(step, crash_at_once);
        }
    }
}

fn stop_a_recycle(step: &'static str, crash_at_once: bool) {
    let dir = test_dir();
    let root = dir.path().to_path_buf();
    let written = run({
        let root = root.clone();
        async move {
            let storage = start(&root, StorageMetrics::default()).await;
            let log = open(&storage, &root, "t").await;
            let mut written = write(&log, 5, 40).await;
            failpoint::arm(step, libc::EIO);
            // Write until the armed step has run (retention or a roll reached it).
            for i in 0..40u64 {
                let bytes = build_batch(2, &[0x7f; 1000], i as i64);
                let payload =
                    ProducePayload::validate(Bytes::from(bytes.clone()), 1 << 20).expect("valid");
                let appended = log.append(&payload, 0).await.expect("append");
                written.insert(appended.base_offset.0, identity(&bytes));
                appended.durable.await.expect("durable");
                let _ = log.enforce_retention().await;
                if crash_at_once && !failpoint::is_armed(step) {
                    break;
                }
            }
            assert!(failpoint::check(step).is_none(), "{step} was reached");
            assert_holds(&log, &written, step).await;
            written
        }
    });
    run(async move {
        let storage = start(&root, StorageMetrics::default()).await;
        let log = open(&storage, &root, "t").await;
        let end = *written.keys().last().expect("written") + 2;
        assert_eq!(
            log.high_watermark().0,
            end,
            "{step}: every durable batch is back"
        );
        assert_holds(&log, &written, step).await;
        log.enforce_retention().await.expect("retention finishes");
        // Appends continue over whatever the pool kept, and a clean reopen agrees.
        let more = write(&log, 7, 30).await;
        log.close().await.expect("close");
        let log = open(&storage, &root, "t").await;
        let mut all = written;
        all.extend(more);
        assert_holds(&log, &all, step).await;
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

/// The active segment's log file: its path, its data's length and the file's length.
fn active_file(log: &PartitionLog) -> (std::path::PathBuf, u64, u64) {
    let st = log.shared.state.borrow();
    let active = st.segments.back().expect("active segment");
    let path = active.paths.log.clone();
    let len = std::fs::metadata(&path).expect("active log").len();
    (path, active.size(), len)
}

#[test]
fn a_clean_close_keeps_the_active_file_whole_and_a_crash_still_cuts_it() {
    let dir = test_dir();
    let root = dir.path().to_path_buf();
    let marker = root.join("t-0").join(clean_close::CLEAN_CLOSE_FILE);
    let (written, path, len) = run({
        let (root, marker) = (root.clone(), marker.clone());
        async move {
            let storage = start(&root, StorageMetrics::default()).await;
            let log = open(&storage, &root, "t").await;
            let mut written = write(&log, 1, 120).await;
            let (path, size, len) = active_file(&log);
            assert!(
                len > size + 4096,
                "stale bytes past the data: {size} of {len}"
            );
            log.close().await.expect("close");
            assert_eq!(std::fs::metadata(&path).expect("log").len(), len, "not cut");
            assert!(marker.exists(), "the close is recorded");

            let (log, report) = open_reporting(&storage, &root, "t").await;
            assert!(!marker.exists(), "the record is taken at the open");
            assert_eq!(report.kept_tail_bytes, len - size, "{report:?}");
            assert_eq!((report.truncated_bytes, report.padding_bytes), (0, 0));
            assert_eq!(std::fs::metadata(&path).expect("log").len(), len);
            let known = log
                .shared
                .state
                .borrow()
                .segments
                .back()
                .and_then(|s| s.written_end());
            assert_eq!(
                known,
                Some(len & !4095),
                "appends overwrite the kept bytes in place, with no zero-fill below them"
            );
            assert_holds(&log, &written, "the reopen after a clean close").await;
            // One more batch lands on the kept bytes; then a crash (dropped unclosed).
            written.extend(write(&log, 2, 1).await);
            (written, path, len)
        }
    });
    run(async move {
        assert!(!marker.exists());
        let storage = start(&root, StorageMetrics::default()).await;
        let (log, report) = open_reporting(&storage, &root, "t").await;

        assert_eq!(report.kept_tail_bytes, 0, "{report:?}");
        let (active, size, now) = active_file(&log);
        if active == path {
            assert!(now < len, "cut after the crash: {now} of {len}");
            assert_eq!(now, size);
        }
        assert_holds(&log, &written, "the recovery after the crash").await;
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

/// A clean close's record is trusted only for the file it describes: a last batch
/// damaged since (recovery ends the data before it), or a file cut or grown since (what
/// another build could leave), and the tail is cut as after a crash.
#[test]
fn a_clean_close_record_is_not_trusted_once_the_file_changed() {
    for damage_last_batch in [true, false] {
        let case = if damage_last_batch {
            "last batch damaged"
        } else {
            "file shortened"
        };
        let dir = test_dir();
        run(async move {
            let root = dir.path();
            let storage = start(root, StorageMetrics::default()).await;
            let log = open(&storage, root, "t").await;
            let mut written = write(&log, 1, 120).await;
            let (path, size, len) = active_file(&log);
            assert!(len > size + 4096, "{case}: stale bytes past the data");
            log.close().await.expect("close");
            if damage_last_batch {
                let mut bytes = std::fs::read(&path).expect("read");
                bytes[size as usize - 1] ^= 0xff;
                std::fs::write(&path, &bytes).expect("damage");
                written.pop_last();
            } else {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_len(len - 4096))
                    .expect("shorten");
            }
            let (log, report) = open_reporting(&storage, root, "t").await;

            assert_eq!(report.kept_tail_bytes, 0, "{case}: {report:?}");
            let (_, size, now) = active_file(&log);
            assert_eq!(now, size, "{case}: cut at the data, as after a crash");
            assert_holds(&log, &written, case).await;
            log.close().await.expect("close");
            storage.shutdown().await;
        });
    }
}
