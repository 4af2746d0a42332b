//! Durable append throughput through the whole engine on the real disk: one partition
//! log takes 16 KiB batches as fast as it can, with several appends in flight (as a
//! pipelining producer has), each one counted only once the group commit made it
//! durable. Compared across group-commit intervals and the three ways a segment file can
//! grow (`FileGrowth`). `benches/durable_append.sh` runs fio on the same disk in the same
//! run and prints the ratios. Also: cached tail reads of 1 MiB.

use std::{
    collections::VecDeque,
    path::PathBuf,
    time::{Duration, Instant},
};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use glommio::{LocalExecutor, LocalExecutorBuilder, Placement};
use weir::storage::{
    partition_log::Durable, Clock, FileGrowth, FlushConfig, FlushMode, LogConfig, Offset,
    ProducePayload, ShardStorage, ShardStorageConfig,
};
use weir_client::record_batch::build_batch;

const BATCH_BYTES: usize = 16 << 10;
/// Appended bytes not yet durable before the producer waits, like a producer's buffer
/// (large enough that the producer keeps the disk busy while a flush round runs).
const IN_FLIGHT_BYTES_MAX: usize = 128 << 20;

fn bench_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    std::fs::create_dir_all(&base).expect("bench dir");
    tempfile::tempdir_in(base).expect("tempdir")
}

fn executor() -> LocalExecutor {
    let cpu = std::env::var("WEIR_BENCH_CPU")
        .ok()
        .and_then(|c| c.parse::<usize>().ok());
    let placement = match cpu {
        Some(c) => Placement::Fixed(c),
        None => Placement::Unbound,
    };
    LocalExecutorBuilder::new(placement)
        .make()
        .expect("executor")
}

fn batch() -> ProducePayload {
    // One batch of 16 records of ~1 KiB each: 16 KiB.
    let value = vec![0x5au8; 1024 - 12];
    let b = build_batch(16, &value, 1_700_000_000_000);
    assert!(
        b.len().abs_diff(BATCH_BYTES) < 256,
        "batch is {} bytes",
        b.len()
    );
    ProducePayload::validate(Bytes::from(b), 1 << 20).expect("valid")
}

async fn start(dir: &std::path::Path, flush: FlushConfig, cache: usize) -> ShardStorage {
    ShardStorage::start(
        ShardStorageConfig {
            data_dir: dir.to_path_buf(),
            flush,
            cache_bytes_max: cache,
            metrics: Default::default(),
            recycle: Default::default(),
        },
        Clock::System,
    )
    .await
    .expect("storage")
}

/// Appends `iters` batches with bounded in-flight bytes; returns the time until the last
/// one is durable.
async fn durable_appends(iters: u64, flush: FlushConfig, growth: FileGrowth) -> Duration {
    let dir = bench_dir();
    let storage = start(dir.path(), flush, 64 << 20).await;
    let config = LogConfig {
        growth,
        ..LogConfig::default()
    };
    let (log, _) = storage
        .open_log(&dir.path().join("t-0"), config)
        .await
        .expect("open");
    let payload = batch();
    let per = payload.total_bytes();
    let mut pending: VecDeque<Durable> = VecDeque::new();
    let started = Instant::now();
    for i in 0..iters {
        let appended = log.append(&payload, 0).await.expect("append");
        pending.push_back(appended.durable);
        while pending.len() * per > IN_FLIGHT_BYTES_MAX {
            pending
                .pop_front()
                .expect("pending")
                .await
                .expect("durable");
        }
        // A network loop yields between requests; let the flush loop run.
        if i % 16 == 15 {
            futures_lite::future::yield_now().await;
        }
    }
    for d in pending {
        d.await.expect("durable");
    }
    let elapsed = started.elapsed();
    log.close().await.expect("close");
    storage.shutdown().await;
    elapsed
}

fn durable_append(c: &mut Criterion) {
    let ex = executor();
    let mut group = c.benchmark_group("durable_append_16k");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(6))
        .warm_up_time(Duration::from_secs(2));
    group.throughput(Throughput::Bytes(batch().total_bytes() as u64));
    let growths = [
        ("append", FileGrowth::Append),
        (
            "fallocate_64m",
            FileGrowth::Fallocate {
                step_bytes: 64 << 20,
            },
        ),
        (
            "zerofill_2m",
            FileGrowth::ZeroFill {
                step_bytes: 2 << 20,
            },
        ),
        (
            "zerofill_8m",
            FileGrowth::ZeroFill {
                step_bytes: 8 << 20,
            },
        ),
        (
            "zerofill_32m",
            FileGrowth::ZeroFill {
                step_bytes: 32 << 20,
            },
        ),
    ];
    for interval_ms in [1u64, 5] {
        for (name, growth) in growths {
            let flush = FlushConfig {
                interval: Duration::from_millis(interval_ms),
                dirty_bytes_max: 64 << 20,
                mode: FlushMode::Fsync,
                target_p99: None,
            };
            group.bench_function(
                BenchmarkId::new(format!("{name}/interval_{interval_ms}ms"), "fsync"),
                |b| b.iter_custom(|iters| ex.run(durable_appends(iters, flush, growth))),
            );
        }
    }
    let write_only = FlushConfig {
        interval: Duration::from_millis(1),
        dirty_bytes_max: 64 << 20,
        mode: FlushMode::WriteOnly,
        target_p99: None,
    };
    group.bench_function(BenchmarkId::new("append/interval_1ms", "write_only"), |b| {
        b.iter_custom(|iters| ex.run(durable_appends(iters, write_only, FileGrowth::Append)))
    });
    group.finish();
}

fn cached_tail_read(c: &mut Criterion) {
    let ex = executor();
    let mut group = c.benchmark_group("tail_read");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    const READ_BYTES: usize = 1 << 20;
    group.throughput(Throughput::Bytes(READ_BYTES as u64));
    group.bench_function("cached_1MiB", |b| {
        b.iter_custom(|iters| {
            ex.run(async move {
                let dir = bench_dir();
                let flush = FlushConfig {
                    interval: Duration::ZERO,
                    ..FlushConfig::default()
                };
                let storage = start(dir.path(), flush, 256 << 20).await;
                let (log, _) = storage
                    .open_log(&dir.path().join("t-0"), LogConfig::default())
                    .await
                    .expect("open");
                let payload = batch();
                let mut last = None;
                for _ in 0..(16 << 20) / payload.total_bytes() {
                    last = Some(log.append(&payload, 0).await.expect("append").durable);
                }
                last.expect("appended").await.expect("durable");
                let hw = log.high_watermark().0;
                let records_per_read = (READ_BYTES / payload.total_bytes()) as u64 * 16;
                let started = Instant::now();
                for i in 0..iters {
                    let at = (i * records_per_read) % (hw - records_per_read);
                    let read = log.read(Offset(at), READ_BYTES).await.expect("read");
                    assert!(read.records.len() > READ_BYTES / 2);
                }
                let elapsed = started.elapsed();
                log.close().await.expect("close");
                storage.shutdown().await;
                elapsed
            })
        })
    });
    group.finish();
}

criterion_group!(benches, durable_append, cached_tail_read);
criterion_main!(benches);
