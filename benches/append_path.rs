//! The CPU cost of the append path without the disk: validating a produce payload
//! (header checks + CRC-32C), indexing it and copying it into an aligned buffer, next
//! to plain CRC-32C over the same bytes. Target: validation at most 1.3x the CRC alone.
//! Also the sparse index lookup at 1M entries.

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use weir::storage::{
    record_batch::ProducePayload,
    segment_index::{IndexedBatch, OffsetEntry, OffsetIndex, SegmentIndex},
    FilePosition, Offset,
};
use weir_client::record_batch::build_batch;

/// One batch of about `bytes` bytes (records of 1 KiB values).
fn batch_of(bytes: usize) -> Bytes {
    let records = (bytes / 1024).max(1) as u32;
    let value = vec![0x42u8; bytes / records as usize - 80];
    Bytes::from(build_batch(records, &value, 1_700_000_000_000))
}

fn append_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_path");
    for size in [1usize << 10, 16 << 10] {
        let batch = batch_of(size);
        let len = batch.len();
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("crc32c_only", size), &batch, |b, batch| {
            b.iter(|| crc32c::crc32c(black_box(&batch[21..])))
        });
        group.bench_with_input(BenchmarkId::new("validate", size), &batch, |b, batch| {
            b.iter(|| ProducePayload::validate(black_box(batch.clone()), 1 << 20).expect("valid"))
        });
        // Validate, index and copy into a page-aligned buffer, as an append does.
        // The size of one write chunk (`write_chunk_bytes_max`), reused as the appender
        // reuses freed chunks.
        let mut buffer = vec![0u8; 1 << 20];
        let mut index = SegmentIndex::new(Offset(0), 4096);
        let mut at = 0usize;
        let mut next = 0u64;
        group.bench_with_input(
            BenchmarkId::new("validate_index_copy", size),
            &batch,
            |b, batch| {
                b.iter(|| {
                    let payload = ProducePayload::validate(batch.clone(), 1 << 20).expect("valid");
                    for rb in payload.batches() {
                        if at + rb.len() > buffer.len() {
                            at = 0;
                            next = 0;
                            index = SegmentIndex::new(Offset(0), 4096);
                        }
                        let prefix = rb.rewritten_prefix(Offset(next), 0);
                        buffer[at..at + 16].copy_from_slice(&prefix);
                        buffer[at + 16..at + rb.len()].copy_from_slice(rb.unchanged_suffix());
                        let count = u64::from(rb.record_count());
                        index.track(IndexedBatch {
                            position: FilePosition(at as u64),
                            base_offset: Offset(next),
                            last_offset: Offset(next + count - 1),
                            max_timestamp: rb.max_timestamp(),
                            bytes: rb.len() as u64,
                        });
                        at += rb.len();
                        next += count;
                    }
                    black_box(&buffer[at.saturating_sub(1)]);
                })
            },
        );
    }
    group.finish();
}

fn index_lookup(c: &mut Criterion) {
    let mut index = OffsetIndex::default();
    for i in 1..=1_000_000u32 {
        index.push(OffsetEntry {
            relative_offset: i * 4,
            position: i * 4096,
        });
    }
    let mut x = 0x9e37_79b9u32;
    c.bench_function("segment_index/lookup_1M_entries", |b| {
        b.iter(|| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            index.lookup(black_box(x % 4_000_000))
        })
    });
}

criterion_group!(benches, append_path, index_lookup);
criterion_main!(benches);
