//! Compaction on real files: what a pass keeps, that offsets never move, that a
//! reopened log reads the same, and that a pass stopped at any file-system step (as a
//! crash would stop it) leaves a log that reads whole.

use std::{collections::BTreeMap, time::Duration};

use weir_client::record_batch::{BatchBuilder, Producer};

use super::{tests::start_storage, *};
use crate::ids::LeaderEpoch;
use crate::storage::{
    batch_records::records,
    config::CleanupPolicy,
    failpoint,
    record_batch::RecordBatch,
    test_support::{run, test_dir},
    ShardStorage,
};
use bytes::Bytes;

/// A record as read back: offset → (key, value; `None` for a tombstone).
type Contents = BTreeMap<u64, (Option<Vec<u8>>, Option<Vec<u8>>)>;

fn config(delete_retention: Duration) -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        cleanup: CleanupPolicy::Compact,
        delete_retention,
        ..LogConfig::default()
    }
}

async fn open(storage: &ShardStorage, dir: &Path, config: LogConfig) -> PartitionLog {
    storage
        .open_log(&dir.join("t-0"), config)
        .await
        .expect("open")
        .0
}

fn payload(bytes: Bytes) -> ProducePayload {
    ProducePayload::validate(bytes, 1 << 20).expect("valid")
}

/// 8 versions of 30 keys in batches of 6, then tombstones for keys 0–3, keyless
/// records, and one large record that rolls every earlier segment into sealed ones.
async fn write(log: &PartitionLog, now: i64) {
    let mut version = 0;
    for round in 0..8 {
        for chunk in 0..5 {
            let mut b = BatchBuilder::new(1024, now);
            for k in chunk * 6..chunk * 6 + 6 {
                b.push(
                    now,
                    Some(format!("key-{k}").as_bytes()),
                    format!("v{round}-{version}").as_bytes(),
                );
                version += 1;
            }
            durable(log, payload(b.finish())).await;
        }
    }
    let mut b = BatchBuilder::new(1024, now);
    for k in 0..4 {
        b.push_tombstone(now, format!("key-{k}").as_bytes());
    }
    b.push(now, None, b"keyless");
    durable(log, payload(b.finish())).await;
    let mut b = BatchBuilder::new(8192, now);
    b.push(now, Some(b"roll"), &[7u8; 4000]);
    durable(log, payload(b.finish())).await;
}

async fn durable(log: &PartitionLog, p: ProducePayload) {
    log.append(&p, 0)
        .await
        .expect("append")
        .durable
        .await
        .expect("durable");
}

/// Every record of the log, checking on the way that batches follow each other densely.
async fn contents(log: &PartitionLog) -> Contents {
    let mut out = Contents::new();
    let mut next = log.log_start_offset().0;
    let end = log.high_watermark().0;
    while next < end {
        let read = log.read(Offset(next), 1 << 20).await.expect("read");
        let mut rest: &[u8] = &read.records;
        while !rest.is_empty() {
            let (batch, tail) = RecordBatch::validate_stored(rest, 1 << 20).expect("stored batch");
            assert!(
                batch.base_offset() as u64 <= next,
                "dense: batch at {} after {next}",
                batch.base_offset()
            );
            let recs = records(&batch).expect("records");
            for span in &recs.spans {
                let offset = batch.base_offset() as u64 + u64::from(span.offset_delta);
                let key = recs.key(span).map(<[u8]>::to_vec);
                let value = (!span.tombstone).then(|| recs.body[span.bytes.clone()].to_vec());
                if offset >= next {
                    out.insert(offset, (key, value));
                }
            }
            next = next.max(batch.base_offset() as u64 + batch.offset_count());
            rest = tail;
        }
    }
    out
}

/// The newest record of each key in `before` below `sealed_end`, every record at or
/// past it, and tombstones only when `tombstones`.
fn expected(before: &Contents, sealed_end: u64, tombstones: bool) -> Contents {
    let mut newest: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    for (offset, (key, _)) in before.range(..sealed_end) {
        if let Some(k) = key {
            newest.insert(k.clone(), *offset);
        }
    }
    before
        .iter()
        .filter(|(offset, (key, value))| {
            **offset >= sealed_end
                || key.as_ref().is_some_and(|k| newest[k] == **offset)
                    && (value.is_some() || tombstones)
        })
        .map(|(o, r)| (*o, r.clone()))
        .collect()
}

/// One record of `key` as a batch of its own, of producer `txn`'s open transaction when
/// given.
fn keyed(now: i64, key: &[u8], value: &[u8], txn: Option<i64>) -> ProducePayload {
    let mut b = BatchBuilder::new(1024, now);
    if let Some(id) = txn {
        b = b
            .producer(Producer {
                id,
                epoch: 0,
                base_sequence: 0,
            })
            .transactional();
    }
    b.push(now, Some(key), value);
    payload(b.finish())
}

/// A record large enough to roll the active segment.
fn roll(now: i64) -> ProducePayload {
    let mut b = BatchBuilder::new(8192, now);
    b.push(now, Some(b"roll"), &[7u8; 4000]);
    payload(b.finish())
}

fn sealed_end(log: &PartitionLog) -> u64 {
    let st = log.shared.state.borrow();
    st.segments.back().expect("active").base().0
}

async fn settle(log: &PartitionLog) {
    // Sealing runs after the round that made the data durable.
    for _ in 0..100 {
        if log.compaction_due() {
            return;
        }
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
    panic!("no segment sealed");
}

#[test]
fn a_pass_keeps_the_newest_record_of_each_key_at_its_offset() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open(&storage, dir.path(), config(Duration::from_secs(3600))).await;
        let now = storage.clock().now_ms();
        write(&log, now).await;
        settle(&log).await;
        let before = contents(&log).await;
        let sealed = sealed_end(&log);
        let report = log.compact(&mut Pace::new(0)).await.expect("compact");
        assert!(
            report.segments_rewritten > 0 && report.bytes_after < report.bytes_before,
            "{report:?}"
        );
        let after = contents(&log).await;
        assert_eq!(after, expected(&before, sealed, true));
        assert_eq!(
            log.offsets().log_end.0,
            before.keys().last().unwrap() + 1,
            "offsets kept"
        );
        assert!(!log.compaction_due(), "nothing new to do");
        let again = log.compact(&mut Pace::new(0)).await.expect("again");
        assert_eq!(
            again.segments_rewritten, 0,
            "a second pass finds nothing: {again:?}"
        );
        log.close().await.expect("close");
        let reopened = open(&storage, dir.path(), config(Duration::from_secs(3600))).await;
        assert_eq!(
            contents(&reopened).await,
            after,
            "recovery reads compacted segments"
        );
        reopened.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn tombstones_and_keyless_records_go_but_a_producers_last_batch_stays() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open(&storage, dir.path(), config(Duration::ZERO)).await;
        let now = storage.clock().now_ms() - 1;
        let producer = Producer {
            id: 9,
            epoch: 0,
            base_sequence: 0,
        };
        let mut b = BatchBuilder::new(1024, now).producer(producer);
        b.push(now, Some(b"key-0"), b"idempotent");
        let idempotent = b.finish();
        durable(&log, payload(idempotent.clone())).await;
        write(&log, now).await;
        settle(&log).await;
        let before = contents(&log).await;
        let sealed = sealed_end(&log);
        log.compact(&mut Pace::new(0)).await.expect("compact");
        assert_eq!(contents(&log).await, expected(&before, sealed, false));
        log.close().await.expect("close");
        let reopened = open(&storage, dir.path(), config(Duration::ZERO)).await;
        let retry = reopened
            .append(&payload(idempotent), 0)
            .await
            .expect("retry");
        assert_eq!(
            retry.base_offset,
            Offset(0),
            "the producer's emptied batch still answers its retry"
        );
        reopened.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn a_pass_stopped_at_any_step_leaves_a_whole_log() {
    for step in [
        "compaction remove indexes",
        "compaction rename log",
        "compaction rename indexes",
    ] {
        let dir = test_dir();
        run(async move {
            let storage = start_storage(dir.path()).await;
            let log = open(&storage, dir.path(), config(Duration::from_secs(3600))).await;
            write(&log, storage.clock().now_ms()).await;
            settle(&log).await;
            let before = contents(&log).await;
            let compacted = expected(&before, sealed_end(&log), true);
            failpoint::arm(step, libc::EIO);
            log.compact(&mut Pace::new(0)).await.expect_err(step);
            log.close().await.expect("close");
            let reopened = open(&storage, dir.path(), config(Duration::from_secs(3600))).await;
            let now = contents(&reopened).await;
            let first = compacted.keys().next().copied().unwrap_or(0);
            assert!(
                now == before || now.range(first..).eq(compacted.range(first..)) || {
                    // Segments before the stopped one were swapped, the rest were not.
                    now.iter().all(|(o, r)| before.get(o) == Some(r))
                        && compacted.iter().all(|(o, r)| now.get(o) == Some(r))
                },
                "{step}: the log reads as before or after compaction, segment by segment"
            );
            let leftovers = std::fs::read_dir(dir.path().join("t-0"))
                .expect("list")
                .filter(|e| {
                    e.as_ref()
                        .expect("entry")
                        .path()
                        .to_string_lossy()
                        .ends_with(CLEANED_SUFFIX)
                })
                .count();
            assert_eq!(leftovers, 0, "{step}: open removes what the pass left");
            reopened
                .compact(&mut Pace::new(0))
                .await
                .expect("a later pass finishes");
            assert_eq!(contents(&reopened).await, compacted, "{step}");
            reopened.close().await.expect("close");
            storage.shutdown().await;
        });
    }
}

#[test]
fn a_time_lookup_finds_the_first_kept_record_of_a_compacted_batch() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open(&storage, dir.path(), config(Duration::from_secs(3600))).await;
        let mut b = BatchBuilder::new(1024, 1_000);
        for (at, key) in [(1_000, "a"), (2_000, "b"), (3_000, "a"), (4_000, "c")] {
            b.push(at, Some(key.as_bytes()), b"value");
        }
        durable(&log, payload(b.finish())).await;
        let mut b = BatchBuilder::new(8192, 5_000);
        b.push(5_000, Some(b"roll"), &[7u8; 4000]);
        durable(&log, payload(b.finish())).await;
        settle(&log).await;
        log.compact(&mut Pace::new(0)).await.expect("compact");
        let at = |t| log.offset_for_timestamp(TimestampQuery::At(t));
        // Offset 0 (a at 1,000) is gone: the first record at or after 500 is b at 1.
        assert_eq!(
            at(500).await.expect("lookup").map(|f| f.offset),
            Some(Offset(1))
        );
        assert_eq!(
            at(2_500).await.expect("lookup").map(|f| f.offset),
            Some(Offset(2))
        );
        assert_eq!(
            at(3_500).await.expect("lookup").map(|f| f.offset),
            Some(Offset(3))
        );
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn a_follower_copies_a_compacted_log_batch_for_batch() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let leader = open(&storage, dir.path(), config(Duration::from_secs(3600))).await;
        write(&leader, storage.clock().now_ms()).await;
        settle(&leader).await;
        leader.compact(&mut Pace::new(0)).await.expect("compact");
        let follower = storage
            .open_log(&dir.path().join("t-1"), config(Duration::from_secs(3600)))
            .await
            .expect("open follower")
            .0;
        // What a follower's fetches get: whole stored batches from its log end on.
        while follower.log_end() < leader.high_watermark() {
            let read = leader
                .read_replica(follower.log_end(), 64 << 10)
                .await
                .expect("read");
            let fetched = ProducePayload::validate_stored(read.records, usize::MAX)
                .expect("compacted batches are valid stored batches");
            follower
                .append_replica(&fetched)
                .await
                .expect("append")
                .durable
                .waiting_for(Wait::Local)
                .await
                .expect("durable");
        }
        assert_eq!(contents(&follower).await, contents(&leader).await);
        follower.close().await.expect("close");
        leader.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn aborted_records_never_shadow_a_committed_value_and_open_transactions_stay() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open(&storage, dir.path(), config(Duration::ZERO)).await;
        let now = storage.clock().now_ms() - 1;
        let record = |key: &[u8], value: &[u8], txn: Option<i64>| keyed(now, key, value, txn);
        let roll = || roll(now);
        durable(&log, record(b"a", b"committed", None)).await; // 0
        durable(&log, record(b"a", b"aborted", Some(5))).await; // 1
        let marker = log
            .append_marker(
                Marker::of(5, 0, false, MarkerEnds::AtItsEpoch),
                LeaderEpoch(0),
            )
            .await
            .expect("marker"); // 2
        marker.durable.await.expect("durable");
        durable(&log, roll()).await; // 3, a new segment
        durable(&log, record(b"b", b"open", Some(6))).await; // 4
        durable(&log, record(b"b", b"plain", None)).await; // 5
        durable(&log, roll()).await; // 6, a new segment
        durable(&log, roll()).await; // 7
        settle(&log).await;
        log.compact(&mut Pace::new(0)).await.expect("compact");
        // The record as stored ends with its value (and an empty header count).
        let holds = |c: &Contents, o: u64, value: &[u8]| {
            c.get(&o)
                .and_then(|(_, v)| v.as_ref())
                .is_some_and(|r| r.windows(value.len()).any(|w| w == value))
        };
        let after = contents(&log).await;
        assert!(holds(&after, 0, b"committed"), "not shadowed");
        assert!(!after.contains_key(&1), "the aborted record went");
        assert!(holds(&after, 4, b"open"), "past the LSO: kept");
        // Once the transaction commits, its record is an ordinary older version.
        let marker = log
            .append_marker(
                Marker::of(6, 0, true, MarkerEnds::AtItsEpoch),
                LeaderEpoch(0),
            )
            .await
            .expect("marker");
        marker.durable.await.expect("durable");
        durable(&log, roll()).await;
        durable(&log, roll()).await;
        settle(&log).await;
        log.compact(&mut Pace::new(0)).await.expect("compact");
        let after = contents(&log).await;
        assert!(
            !after.contains_key(&4),
            "shadowed by the newer plain record"
        );
        assert!(holds(&after, 5, b"plain"));
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

/// Base offsets of the log's control batches (transaction markers).
async fn markers(log: &PartitionLog) -> Vec<u64> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset().0;
    while next < log.high_watermark().0 {
        let read = log.read(Offset(next), 1 << 20).await.expect("read");
        let mut rest: &[u8] = &read.records;
        while !rest.is_empty() {
            let (batch, tail) = RecordBatch::validate_stored(rest, 1 << 20).expect("stored batch");
            let base = batch.base_offset() as u64;
            if base >= next && batch.is_control() {
                out.push(base);
            }
            next = next.max(base + batch.offset_count());
            rest = tail;
        }
    }
    out
}

#[test]
fn a_marker_goes_with_the_last_of_its_transaction_once_past_delete_retention() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open(&storage, dir.path(), config(Duration::from_secs(3600))).await;
        let now = storage.clock().now_ms() - 1;
        let record = |key: &[u8], txn: Option<i64>| keyed(now, key, b"v", txn);
        let roll = || roll(now);
        let mark = |producer: i64, commit: bool| {
            let log = &log;
            async move {
                let m = log
                    .append_marker(
                        Marker::of(producer, 0, commit, MarkerEnds::AtItsEpoch),
                        LeaderEpoch(0),
                    )
                    .await
                    .expect("marker");
                m.durable.await.expect("durable");
            }
        };
        durable(&log, record(b"a", Some(5))).await; // 0: committed, later shadowed
        mark(5, true).await; // 1
        durable(&log, record(b"b", Some(6))).await; // 2: aborted
        mark(6, false).await; // 3
        durable(&log, record(b"c", Some(7))).await; // 4: committed, the newest of "c"
        mark(7, true).await; // 5
        durable(&log, record(b"a", None)).await; // 6: shadows offset 0
        durable(&log, roll()).await; // 7, a new segment
        durable(&log, roll()).await; // 8
        settle(&log).await;
        log.compact(&mut Pace::new(0)).await.expect("compact");
        assert_eq!(
            markers(&log).await,
            vec![1, 3, 5],
            "younger than delete.retention.ms: every marker stays"
        );
        assert!(
            !log.compaction_due(),
            "nothing more to do until the markers are due"
        );
        log.set_config(config(Duration::ZERO)).expect("config");
        log.compact(&mut Pace::new(0)).await.expect("compact");
        assert_eq!(
            markers(&log).await,
            vec![1, 3, 5],
            "the producers remember their batches (empty now), which keeps them and so \
             their transactions' markers"
        );
        // Once the producers are forgotten (a first pass starts their time), their
        // emptied batches go, and the markers with them.
        log.expire_producers(Duration::ZERO);
        glommio::timer::sleep(Duration::from_millis(5)).await;
        assert_eq!(log.expire_producers(Duration::ZERO), 3);
        log.compact(&mut Pace::new(0)).await.expect("compact");
        let after = contents(&log).await;
        assert_eq!(
            markers(&log).await,
            vec![5],
            "only the marker of a transaction with a record left stays"
        );
        assert!(after.contains_key(&4) && after.contains_key(&6));
        assert!(!after.contains_key(&0) && !after.contains_key(&2));
        assert_eq!(log.last_stable_offset(), log.high_watermark());
        // Recovered from the files, no transaction reads as open.
        log.close().await.expect("close");
        let reopened = open(&storage, dir.path(), config(Duration::ZERO)).await;
        assert_eq!(markers(&reopened).await, vec![5]);
        assert_eq!(contents(&reopened).await, after);
        assert_eq!(reopened.last_stable_offset(), reopened.high_watermark());
        reopened.close().await.expect("close");
        storage.shutdown().await;
    });
}
