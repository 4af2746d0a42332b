//! The log's transactions over real O_DIRECT segments: markers, the LSO, the aborted
//! list, and their rebuild on reopen (from the roll checkpoint, from a checkpoint inside
//! the segment, and from a full scan).

use super::*;
use crate::ids::LeaderEpoch;
use crate::storage::{
    partition_txns::AbortedTxn,
    producer_state::SequenceError,
    test_support::{run, start_storage, test_dir},
    ShardStorage,
};
use weir_client::record_batch::{BatchBuilder, Producer};

async fn open(storage: &ShardStorage, dir: &Path, segment_bytes: u64) -> PartitionLog {
    let config = LogConfig {
        segment_bytes,
        ..LogConfig::default()
    };
    storage
        .open_log(&dir.join("t-0"), config)
        .await
        .expect("open")
        .0
}

/// A transactional batch of `n` records from producer `id`, sequences from `seq`.
fn txn_batch(id: i64, seq: i32, n: u32) -> ProducePayload {
    let mut b = BatchBuilder::new(4096, 0)
        .producer(Producer {
            id,
            epoch: 0,
            base_sequence: seq,
        })
        .transactional();
    for _ in 0..n {
        b.push(0, None, &[7; 1000]);
    }
    ProducePayload::validate(b.finish(), 1 << 20).expect("valid")
}

async fn stored(log: &PartitionLog, payload: &ProducePayload) -> Offset {
    let a = log.append(payload, 0).await.expect("append");
    a.durable.await.expect("durable");
    a.base_offset
}

async fn marker(log: &PartitionLog, id: i64, commit: bool) -> Offset {
    let a = log
        .append_marker(
            Marker::of(id, 0, commit, MarkerEnds::AtItsEpoch),
            LeaderEpoch(0),
        )
        .await
        .expect("marker");
    a.durable.await.expect("durable");
    a.base_offset
}

fn aborted(id: i64, first: u64, last: u64) -> AbortedTxn {
    AbortedTxn {
        producer_id: id,
        first_offset: Offset(first),
        last_offset: Offset(last),
    }
}

#[test]
fn markers_move_the_lso_and_aborted_transactions_survive_reopening() {
    for segment_bytes in [1 << 30, 4096] {
        let dir = test_dir();
        run(async move {
            let storage = start_storage(dir.path()).await;
            let log = open(&storage, dir.path(), segment_bytes).await;
            assert_eq!(stored(&log, &txn_batch(1, 0, 3)).await, Offset(0));
            assert_eq!(stored(&log, &txn_batch(2, 0, 2)).await, Offset(3));
            assert_eq!(log.high_watermark(), Offset(5));
            assert_eq!(log.last_stable_offset(), Offset(0), "1 is open from 0");
            assert_eq!(marker(&log, 1, false).await, Offset(5));
            assert_eq!(log.last_stable_offset(), Offset(3), "2 is open from 3");
            assert_eq!(stored(&log, &txn_batch(1, 3, 1)).await, Offset(6));
            assert_eq!(marker(&log, 2, true).await, Offset(7));
            assert_eq!(log.last_stable_offset(), Offset(6), "1's second one");
            let view = log.stable_view(Offset(0));
            assert_eq!(view.aborted, vec![aborted(1, 0, 5)]);
            assert_eq!(log.open_transactions(), vec![(1, Offset(6))]);
            // Reads of records below the LSO return whole batches as stored.
            let read = log.read(Offset(0), 1 << 20).await.expect("read");
            assert!(!read.records.is_empty());
            log.close().await.expect("close");

            let log = open(&storage, dir.path(), segment_bytes).await;
            assert_eq!(log.last_stable_offset(), Offset(6), "rebuilt after reopen");
            assert_eq!(log.stable_view(Offset(0)).aborted, vec![aborted(1, 0, 5)]);
            assert_eq!(log.stable_view(Offset(6)).aborted, vec![]);
            marker(&log, 1, true).await;
            assert_eq!(log.last_stable_offset(), log.high_watermark());
            if segment_bytes == 4096 {
                assert!(log.offsets().segments > 1, "the test rolled segments");
                assert!(dir.path().join("t-0").join(TXN_CHECKPOINT_FILE).exists());
            }
            log.close().await.expect("close");
            storage.shutdown().await;
        });
    }
}

#[test]
fn a_checkpoint_inside_the_segment_is_where_reopening_scans_from() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open(&storage, dir.path(), 1 << 30).await;
        assert_eq!(stored(&log, &txn_batch(1, 0, 3)).await, Offset(0));
        // More than the (test) checkpoint interval, all in the one segment.
        for seq in (0..12).step_by(3) {
            stored(&log, &txn_batch(2, seq, 3)).await;
        }
        // Written once its end is durable, off the append path.
        let file = dir.path().join("t-0").join(TXN_CHECKPOINT_FILE);
        for _ in 0..200 {
            if file.exists() {
                break;
            }
            glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
        }
        let checkpoint: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).expect("a checkpoint")).expect("json");
        let scanned_to = checkpoint["scanned_to"].as_u64().expect("scanned_to");
        assert!(
            scanned_to > 3,
            "inside the segment, after producer 2's first batches"
        );
        // What follows the checkpoint is found by the scan from it.
        let abort = marker(&log, 1, false).await;
        stored(&log, &txn_batch(2, 12, 3)).await;
        assert_eq!(log.offsets().segments, 1);
        let (lso, view) = (log.last_stable_offset(), log.stable_view(Offset(0)));
        assert_eq!(view.aborted, vec![aborted(1, 0, abort.0)]);
        assert_eq!(lso, Offset(3), "2 is still open from 3");
        log.close().await.expect("close");

        let log = open(&storage, dir.path(), 1 << 30).await;
        assert_eq!(log.last_stable_offset(), lso);
        assert_eq!(log.stable_view(Offset(0)).aborted, view.aborted);
        marker(&log, 2, true).await;
        assert_eq!(log.last_stable_offset(), log.high_watermark());
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn a_marker_at_an_older_epoch_than_the_partitions_is_refused_and_a_newer_one_fences() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open(&storage, dir.path(), 1 << 30).await;
        stored(&log, &txn_batch(1, 0, 1)).await;
        // The coordinator aborted at a bumped epoch: the zombie at epoch 0 is fenced.
        let a = log
            .append_marker(
                Marker::of(1, 1, false, MarkerEnds::AtItsEpoch),
                LeaderEpoch(0),
            )
            .await
            .expect("marker");
        a.durable.await.expect("durable");
        let zombie = log.append(&txn_batch(1, 1, 1), 0).await;
        assert!(
            matches!(zombie, Err(StorageError::Sequence(_))),
            "an epoch-0 batch after an epoch-1 marker"
        );
        assert!(matches!(
            log.append_marker(
                Marker::of(1, 0, true, MarkerEnds::AtItsEpoch),
                LeaderEpoch(0)
            )
            .await,
            Err(StorageError::Sequence(_))
        ));
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn a_v2_marker_delayed_from_the_transaction_before_does_not_end_the_one_open() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open(&storage, dir.path(), 1 << 30).await;
        let at_epoch = |epoch: i16| {
            let mut b = BatchBuilder::new(4096, 0)
                .producer(Producer {
                    id: 1,
                    epoch,
                    base_sequence: 0,
                })
                .transactional();
            b.push(0, None, b"v");
            ProducePayload::validate(b.finish(), 1 << 20).expect("valid")
        };
        let v2_marker = |epoch: i16| {
            log.append_marker(
                Marker::of(1, epoch, false, MarkerEnds::BeforeItsEpoch),
                LeaderEpoch(0),
            )
        };
        // The transaction at epoch 0 ends with a marker at epoch 1; the next runs at 1.
        stored(&log, &at_epoch(0)).await;
        v2_marker(1)
            .await
            .expect("marker")
            .durable
            .await
            .expect("durable");
        let next = stored(&log, &at_epoch(1)).await;
        assert_eq!(log.last_stable_offset(), next);
        // The first transaction's marker again, late: refused, the next stays open.
        assert!(matches!(
            v2_marker(1).await,
            Err(StorageError::Sequence(SequenceError::StaleEpoch {
                current: 1,
                ..
            }))
        ));
        assert_eq!(log.last_stable_offset(), next);
        assert_eq!(log.open_transactions(), vec![(1, next)]);
        // Its own marker, at epoch 2, ends it.
        v2_marker(2)
            .await
            .expect("marker")
            .durable
            .await
            .expect("durable");
        assert_eq!(log.last_stable_offset(), log.high_watermark());
        assert_eq!(log.stable_view(Offset(0)).aborted.len(), 2);
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn a_read_committed_names_only_the_aborted_transactions_of_the_batches_it_returns() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open(&storage, dir.path(), 1 << 30).await;
        // Producer 1's transaction at offsets 0-2, aborted at 3; producer 2's at 4-6,
        // aborted at 7.
        for id in [1, 2] {
            stored(&log, &txn_batch(id, 0, 3)).await;
            marker(&log, id, false).await;
        }
        let names = |view: &StableView| -> Vec<i64> {
            view.aborted.iter().map(|a| a.producer_id).collect()
        };
        // One byte: the first batch alone, whole (Kafka's fetch rule).
        let (read, view) = log.read_committed(Offset(0), 1).await.expect("read");
        assert_eq!(read.last_offset, Some(Offset(2)));
        assert_eq!(
            names(&view),
            vec![1],
            "not producer 2's, beyond the batch read"
        );
        let (_, view) = log.read_committed(Offset(0), 1 << 20).await.expect("read");
        assert_eq!(names(&view), vec![1, 2]);
        let (_, view) = log.read_committed(Offset(4), 1 << 20).await.expect("read");
        assert_eq!(names(&view), vec![2]);
        let end = log.high_watermark();
        let (read, view) = log.read_committed(end, 1 << 20).await.expect("read");
        assert!(read.records.is_empty() && view.aborted.is_empty());
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}
