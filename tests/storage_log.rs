//! The partition log through its public API, on real files: appends, reads, offsets,
//! rolling, retention, timestamps, reopen and the group commit's durability contract.

#[allow(dead_code)]
mod common;

use std::{cell::Cell, rc::Rc, time::Duration};

use common::*;
use weir::storage::{
    Clock, FlushConfig, FlushMode, LogConfig, Offset, StorageError, TimestampQuery,
};

#[test]
fn dma_reads_work_after_writes_on_a_fresh_data_directory() {
    let dir = scratch_dir();
    let data = dir.path().join("fresh");
    run(async move {
        // No cache: every read below must be a DMA read of what the flush wrote.
        let storage = start(&data, fsync_every(Duration::ZERO), 0, Clock::System).await;
        let (log, _) = storage
            .open_log(&data.join("t-0"), LogConfig::default())
            .await
            .expect("open");
        let sent = payload(3, 10, 100, 1, 1000);
        let appended = log.append(&sent, 0).await.expect("append");
        appended.durable.await.expect("durable");
        let read = log.read(Offset(0), 1 << 20).await.expect("read from disk");
        let batches = split_batches(&read.records);
        assert_eq!(batches.len(), 3);
        for (got, want) in batches.iter().zip(sent.batches()) {
            assert_eq!(&got.suffix[..], &want.as_bytes()[16..]);
        }
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn appends_get_dense_offsets_and_reads_follow_kafka_rules() {
    let dir = scratch_dir();
    run(async move {
        let storage = start(
            dir.path(),
            fsync_every(Duration::from_millis(1)),
            8 << 20,
            Clock::System,
        )
        .await;
        let (log, _) = storage
            .open_log(&dir.path().join("t-0"), small_segments(1 << 20))
            .await
            .expect("open");
        let a = log
            .append(&payload(2, 5, 50, 1, 0), 3)
            .await
            .expect("append");
        let b = log
            .append(&payload(1, 7, 50, 2, 0), 3)
            .await
            .expect("append");
        assert_eq!((a.base_offset, a.last_offset), (Offset(0), Offset(9)));
        assert_eq!((b.base_offset, b.last_offset), (Offset(10), Offset(16)));
        b.durable.await.expect("durable");
        a.durable.await.expect("durable");
        let offsets = log.offsets();
        assert_eq!(offsets.high_watermark, Offset(17));
        assert_eq!(offsets.log_end, Offset(17));
        // Reading from the middle of a batch returns that whole batch first.
        let read = log.read(Offset(7), 1 << 20).await.expect("read");
        let batches = split_batches(&read.records);
        assert_eq!(batches[0].base_offset, 5);
        assert_eq!(batches.len(), 2);
        // A max_bytes smaller than the first batch still returns that batch whole.
        let read = log.read(Offset(0), 1).await.expect("read");
        assert_eq!(split_batches(&read.records).len(), 1);
        // At the high watermark: empty; past it: out of range.
        assert!(log
            .read(Offset(17), 100)
            .await
            .expect("read")
            .records
            .is_empty());
        assert!(matches!(
            log.read(Offset(18), 100).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        log.close().await.expect("close");
        assert!(matches!(
            log.append(&payload(1, 1, 1, 0, 0), 0).await,
            Err(StorageError::Closed(_))
        ));
        storage.shutdown().await;
    });
}

#[test]
fn reads_stop_at_the_high_watermark_until_the_flush() {
    let dir = scratch_dir();
    run(async move {
        let storage = start(
            dir.path(),
            fsync_every(Duration::from_millis(200)),
            8 << 20,
            Clock::System,
        )
        .await;
        let (log, _) = storage
            .open_log(&dir.path().join("t-0"), LogConfig::default())
            .await
            .expect("open");
        let a = log
            .append(&payload(1, 5, 50, 1, 0), 0)
            .await
            .expect("append");
        let offsets = log.offsets();
        assert_eq!(offsets.log_end, Offset(5));
        assert_eq!(offsets.high_watermark, Offset(0), "nothing durable yet");
        assert!(log
            .read(Offset(0), 1 << 20)
            .await
            .expect("read")
            .records
            .is_empty());
        a.durable.await.expect("durable");
        assert_eq!(log.high_watermark(), Offset(5));
        assert_eq!(
            split_batches(&log.read(Offset(0), 1 << 20).await.expect("read").records).len(),
            1
        );
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn one_flush_round_covers_many_appends_and_partitions() {
    let dir = scratch_dir();
    run(async move {
        let storage = start(
            dir.path(),
            fsync_every(Duration::from_millis(200)),
            8 << 20,
            Clock::System,
        )
        .await;
        // Open every partition first: opening (directory creation and fsync)
        // is slow on a busy machine and must not straddle the interval.
        let mut logs = Vec::new();
        for p in 0..4 {
            let (log, _) = storage
                .open_log(&dir.path().join(format!("t-{p}")), LogConfig::default())
                .await
                .expect("open");
            logs.push(log);
        }
        let mut acks = Vec::new();
        for log in &logs {
            for i in 0..10 {
                acks.push(
                    log.append(&payload(1, 2, 10, i, 0), 0)
                        .await
                        .expect("append")
                        .durable,
                );
            }
        }
        let before = storage.flusher().rounds();
        for ack in acks {
            ack.await.expect("durable");
        }
        assert_eq!(
            storage.flusher().rounds() - before,
            1,
            "group commit: one round for all"
        );
        for log in &logs {
            log.close().await.expect("close");
        }
        storage.shutdown().await;
    });
}

#[test]
fn segments_roll_by_size_and_age_and_reopen_intact() {
    let dir = scratch_dir();
    let clock_ms = Rc::new(Cell::new(1_000_000i64));
    let clock = Clock::Manual(Rc::clone(&clock_ms));
    run(async move {
        let storage = start(
            dir.path(),
            fsync_every(Duration::ZERO),
            8 << 20,
            clock.clone(),
        )
        .await;
        let config = LogConfig {
            segment_age_max: Some(Duration::from_secs(60)),
            ..small_segments(16 << 10)
        };
        let path = dir.path().join("t-0");
        let (log, _) = storage.open_log(&path, config.clone()).await.expect("open");
        let mut written = 0;
        for i in 0..40 {
            let p = payload(1, 4, 400, i, 1000 + i as i64);
            written += p.record_count();
            append_durably(&log, &p).await;
        }
        let by_size = log.offsets().segments;
        assert!(
            by_size >= 4,
            "16 KiB segments hold ~8 of these batches: {by_size}"
        );
        clock_ms.set(clock_ms.get() + 61_000);
        append_durably(&log, &payload(1, 4, 400, 99, 5000)).await;
        written += 4;
        assert_eq!(
            log.offsets().segments,
            by_size + 1,
            "an old active segment rolls"
        );
        let before = read_all(&log, 3000).await;
        assert_eq!(before.last().map(|b| b.last_offset + 1), Some(written));
        log.close().await.expect("close");
        let (reopened, reports) = storage.open_log(&path, config).await.expect("reopen");
        assert!(
            reports
                .iter()
                .all(|r| r.truncated_bytes == 0 && !r.index_rebuilt),
            "{reports:?}"
        );
        assert_eq!(read_all(&reopened, 1 << 20).await, before);
        assert_eq!(reopened.offsets().log_end, Offset(written));
        reopened.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn retention_deletes_whole_old_segments_by_size_and_age() {
    let dir = scratch_dir();
    let clock_ms = Rc::new(Cell::new(10_000_000i64));
    let clock = Clock::Manual(Rc::clone(&clock_ms));
    run(async move {
        let storage = start(
            dir.path(),
            fsync_every(Duration::ZERO),
            8 << 20,
            clock.clone(),
        )
        .await;
        let config = LogConfig {
            retention_bytes_max: Some(40 << 10),
            retention_age_max: Some(Duration::from_secs(3600)),
            ..small_segments(16 << 10)
        };
        let (log, _) = storage
            .open_log(&dir.path().join("t-0"), config)
            .await
            .expect("open");
        for i in 0..100 {
            let ts = clock_ms.get() - 7_200_000 + i; // two hours old
            append_durably(&log, &payload(1, 2, 900, i as u64, ts)).await;
        }
        let before = log.offsets();
        let deleted = log.enforce_retention().await.expect("retention");
        let after = log.offsets();
        assert!(deleted > 0);
        assert_eq!(after.segments, 1, "all sealed segments are expired by age");
        assert!(after.log_start > before.log_start);
        assert!(matches!(
            log.read(Offset(0), 100).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        assert!(!read_all(&log, 1 << 20).await.is_empty());
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn retention_by_size_keeps_the_newest_segments() {
    let dir = scratch_dir();
    run(async move {
        let storage = start(
            dir.path(),
            fsync_every(Duration::ZERO),
            8 << 20,
            Clock::System,
        )
        .await;
        let config = LogConfig {
            retention_bytes_max: Some(40 << 10),
            retention_age_max: None,
            ..small_segments(16 << 10)
        };
        let (log, _) = storage
            .open_log(&dir.path().join("t-0"), config)
            .await
            .expect("open");
        for i in 0..100 {
            append_durably(&log, &payload(1, 2, 900, i, 0)).await;
        }
        log.enforce_retention().await.expect("retention");
        let after = log.offsets();
        assert!(after.bytes < (40 << 10) + (16 << 10), "{after:?}");
        assert!(after.bytes >= 40 << 10 || after.segments == 1, "{after:?}");
        assert_eq!(
            read_all(&log, 1 << 20).await.last().map(|b| b.last_offset),
            Some(199)
        );
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn offsets_for_timestamps() {
    let dir = scratch_dir();
    run(async move {
        let storage = start(dir.path(), fsync_every(Duration::ZERO), 0, Clock::System).await;
        let (log, _) = storage
            .open_log(&dir.path().join("t-0"), small_segments(8 << 10))
            .await
            .expect("open");
        // Batch i holds 3 records with timestamps 1000 + 10 i .. + 2.
        for i in 0..60i64 {
            append_durably(&log, &payload(1, 3, 300, i as u64, 1000 + 10 * i)).await;
        }
        let q = |query| {
            let log = log.clone();
            async move { log.offset_for_timestamp(query).await.expect("lookup") }
        };
        assert_eq!(
            q(TimestampQuery::Earliest).await.map(|t| t.offset),
            Some(Offset(0))
        );
        assert_eq!(
            q(TimestampQuery::Latest).await.map(|t| t.offset),
            Some(Offset(180))
        );
        let max = q(TimestampQuery::MaxTimestamp).await.expect("max");
        assert_eq!((max.offset, max.timestamp), (Offset(179), 1000 + 590 + 2));
        // To the record, as Kafka answers: inside a batch, the first record at or past
        // the target; between batches, the next batch's first record.
        for i in [0i64, 1, 17, 33, 59] {
            let found = q(TimestampQuery::At(1000 + 10 * i + 1))
                .await
                .expect("found");
            assert_eq!(found.offset, Offset(3 * i as u64 + 1), "batch {i}");
            assert_eq!(found.timestamp, 1000 + 10 * i + 1);
            let last = q(TimestampQuery::At(1000 + 10 * i + 2))
                .await
                .expect("found");
            assert_eq!(
                (last.offset, last.timestamp),
                (Offset(3 * i as u64 + 2), 1000 + 10 * i + 2)
            );
            if i < 59 {
                let between = q(TimestampQuery::At(1000 + 10 * i + 5))
                    .await
                    .expect("found");
                assert_eq!(
                    (between.offset, between.timestamp),
                    (Offset(3 * (i as u64 + 1)), 1000 + 10 * (i + 1))
                );
            }
        }
        assert_eq!(
            q(TimestampQuery::At(0)).await.map(|t| t.offset),
            Some(Offset(0))
        );
        assert_eq!(q(TimestampQuery::At(1_000_000)).await, None);
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn write_only_mode_acknowledges_without_fsync() {
    let dir = scratch_dir();
    run(async move {
        let flush = FlushConfig {
            mode: FlushMode::WriteOnly,
            ..fsync_every(Duration::ZERO)
        };
        let storage = start(dir.path(), flush, 8 << 20, Clock::System).await;
        let (log, _) = storage
            .open_log(&dir.path().join("t-0"), LogConfig::default())
            .await
            .expect("open");
        append_durably(&log, &payload(4, 4, 100, 1, 0)).await;
        assert_eq!(read_all(&log, 1 << 20).await.len(), 4);
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn deleting_a_partition_removes_its_directory() {
    let dir = scratch_dir();
    run(async move {
        let storage = start(
            dir.path(),
            fsync_every(Duration::ZERO),
            8 << 20,
            Clock::System,
        )
        .await;
        let path = dir.path().join("t-0");
        let (log, _) = storage
            .open_log(&path, LogConfig::default())
            .await
            .expect("open");
        append_durably(&log, &payload(1, 1, 10, 1, 0)).await;
        log.delete().await.expect("delete");
        assert!(!path.exists());
        assert!(matches!(
            log.read(Offset(0), 10).await,
            Err(StorageError::Closed(_))
        ));
        storage.shutdown().await;
    });
}

#[test]
fn deleted_records_stay_deleted_across_a_reopen() {
    let dir = scratch_dir();
    run(async move {
        let storage = start(dir.path(), fsync_every(Duration::ZERO), 0, Clock::System).await;
        let path = dir.path().join("t-0");
        let (log, _) = storage
            .open_log(&path, small_segments(8 << 10))
            .await
            .expect("open");
        // 60 batches of 3 records, ~1 KiB each: several segments.
        for i in 0..60u64 {
            append_durably(&log, &payload(1, 3, 300, i, 0)).await;
        }
        let segments = log.offsets().segments;
        assert!(segments > 3, "{segments} segments");
        assert!(matches!(
            log.delete_records(Offset(181)).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        assert_eq!(
            log.delete_records(Offset(100)).await.expect("delete"),
            Offset(100)
        );
        assert_eq!(log.log_start_offset(), Offset(100));
        assert!(
            log.offsets().segments < segments,
            "segments wholly below were deleted"
        );
        assert!(matches!(
            log.read(Offset(99), 1 << 20).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        let read = log
            .read(Offset(100), 1 << 20)
            .await
            .expect("read at the new start");
        assert!(!read.records.is_empty());
        assert_eq!(
            log.delete_records(Offset(50)).await.expect("no-op"),
            Offset(100),
            "the start never moves back"
        );
        log.close().await.expect("close");
        let (reopened, _) = storage
            .open_log(&path, small_segments(8 << 10))
            .await
            .expect("reopen");
        assert_eq!(reopened.log_start_offset(), Offset(100));
        assert_eq!(reopened.offsets().high_watermark, Offset(180));
        reopened.close().await.expect("close");
        storage.shutdown().await;
    });
}
