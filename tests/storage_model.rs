//! Property test: random sequences of appends, reads, retention and reopen agree with
//! an in-memory model of the log. Small segments make rolls frequent.

#[allow(dead_code)]
mod common;

use std::{cell::RefCell, rc::Rc, time::Duration};

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use weir::storage::{Clock, LogConfig, Offset, PartitionLog};

#[derive(Debug, Clone)]
enum Op {
    Append {
        batches: usize,
        records: u32,
        value_len: usize,
    },
    Read {
        at_permille: u32,
        max_bytes: usize,
    },
    Retention,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..4, 1u32..6, 0usize..1500).prop_map(|(batches, records, value_len)| Op::Append { batches, records, value_len }),
        4 => (0u32..=1000, 1usize..12_000).prop_map(|(at_permille, max_bytes)| Op::Read { at_permille, max_bytes }),
        1 => Just(Op::Retention),
        1 => Just(Op::Reopen),
    ]
}

/// What the model knows about one stored batch.
#[derive(Debug, Clone)]
struct ModelBatch {
    base: u64,
    last: u64,
    suffix: Bytes,
}

fn config() -> LogConfig {
    LogConfig {
        retention_bytes_max: Some(24 << 10),
        retention_age_max: None,
        ..small_segments(8 << 10)
    }
}

async fn check_read(log: &PartitionLog, model: &[ModelBatch], at: u64, max_bytes: usize) {
    let read = log.read(Offset(at), max_bytes).await.expect("read");
    let got = split_batches(&read.records);
    let Some(first) = model.iter().position(|b| b.last >= at) else {
        assert!(got.is_empty(), "read at the end returns nothing");
        return;
    };
    assert!(
        !got.is_empty(),
        "a read below the high watermark returns a batch"
    );
    let total: usize = got.iter().map(|b| b.suffix.len() + 16).sum();
    assert!(
        got.len() == 1 || total <= max_bytes,
        "{total} > {max_bytes}"
    );
    for (g, m) in got.iter().zip(&model[first..]) {
        assert_eq!((g.base_offset, g.last_offset), (m.base, m.last));
        assert_eq!(g.suffix, m.suffix, "stored bytes unchanged");
    }
    assert!(got.len() <= model.len() - first);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn log_agrees_with_model(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = scratch_dir();
        run(async move {
            let storage = start(dir.path(), fsync_every(Duration::ZERO), 64 << 10, Clock::System).await;
            let path = dir.path().join("t-0");
            let log = Rc::new(RefCell::new(storage.open_log(&path, config()).await.expect("open").0));
            let mut model: Vec<ModelBatch> = Vec::new();
            let mut next = 0u64;
            let mut seed = 0u64;
            for op in ops {
                let current = log.borrow().clone();
                match op {
                    Op::Append { batches, records, value_len } => {
                        seed += 1;
                        let p = payload(batches, records, value_len, seed, seed as i64);
                        let appended = current.append(&p, 0).await.expect("append");
                        assert_eq!(appended.base_offset, Offset(next));
                        appended.durable.await.expect("durable");
                        for b in p.batches() {
                            let n = u64::from(b.record_count());
                            model.push(ModelBatch { base: next, last: next + n - 1, suffix: Bytes::copy_from_slice(&b.as_bytes()[16..]) });
                            next += n;
                        }
                    }
                    Op::Read { at_permille, max_bytes } => {
                        let start = model.first().map_or(next, |b| b.base);
                        let at = start + (next - start) * u64::from(at_permille) / 1000;
                        check_read(&current, &model, at, max_bytes).await;
                    }
                    Op::Retention => {
                        current.enforce_retention().await.expect("retention");
                        let start = current.offsets().log_start.0;
                        assert!(model.is_empty() || model.iter().any(|b| b.base == start) || start == next,
                            "log start {start} is a batch boundary");
                        model.retain(|b| b.base >= start);
                        let kept: usize = model.iter().map(|b| b.suffix.len() + 16).sum();
                        // A segment holds at most segment_bytes plus one payload (a payload
                        // never splits), and retention keeps at most one segment beyond the
                        // limit.
                        let payload_max = 3 * 6 * (1500 + 16) + 3 * 61;
                        assert!(kept <= (24 << 10) + (8 << 10) + payload_max, "retention bounds size: {kept}");
                    }
                    Op::Reopen => {
                        current.close().await.expect("close");
                        let (reopened, reports) = storage.open_log(&path, config()).await.expect("reopen");
                        assert!(reports.iter().all(|r| r.truncated_bytes == 0), "clean close loses nothing: {reports:?}");
                        *log.borrow_mut() = reopened;
                    }
                }
                let offsets = log.borrow().offsets();
                assert_eq!(offsets.log_end, Offset(next));
                assert_eq!(offsets.high_watermark, Offset(next));
            }
            let current = log.borrow().clone();
            let all = read_all(&current, 5000).await;
            assert_eq!(all.len(), model.len());
            for (g, m) in all.iter().zip(&model) {
                assert_eq!((g.base_offset, &g.suffix), (m.base, &m.suffix));
            }
            current.close().await.expect("close");
            storage.shutdown().await;
        });
    }
}
