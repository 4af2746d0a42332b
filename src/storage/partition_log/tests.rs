//! Fault-injection and idempotence tests of the partition log.

use super::*;
pub(super) use crate::storage::test_support::start_storage;
use crate::storage::{
    failpoint,
    producer_state::SequenceError,
    test_support::{run, test_dir},
    ShardStorage,
};
use bytes::Bytes;
use weir_client::record_batch::build_batch;

/// Opens (or reopens) the log in `dir`/t-0.
async fn open_t0(storage: &ShardStorage, dir: &Path) -> PartitionLog {
    storage
        .open_log(&dir.join("t-0"), LogConfig::default())
        .await
        .expect("open")
        .0
}

fn one_batch(seed: u8) -> ProducePayload {
    ProducePayload::validate(Bytes::from(build_batch(3, &[seed; 200], 0)), 1 << 20).expect("valid")
}

fn fails_then_fences(step: &'static str, errno: i32) {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open_t0(&storage, dir.path()).await;
        log.append(&one_batch(1), 0)
            .await
            .expect("append")
            .durable
            .await
            .expect("durable");
        failpoint::arm(step, errno);
        let failed = log
            .append(&one_batch(2), 0)
            .await
            .expect("append is in memory");
        let err = failed.durable.await.expect_err("the flush failed");
        assert!(
            matches!(&err, StorageError::Fenced { reason, .. } if reason.op == step && reason.raw_os_error == Some(errno)),
            "{err}"
        );
        assert!(
            matches!(
                log.append(&one_batch(3), 0).await,
                Err(StorageError::Fenced { .. })
            ),
            "no retry-and-pretend"
        );
        assert_eq!(
            log.high_watermark(),
            Offset(3),
            "the failed append never became visible"
        );
        let read = log
            .read(Offset(0), 1 << 20)
            .await
            .expect("reads below the high watermark work");
        assert_eq!(read.records.len(), one_batch(1).total_bytes());
        log.close().await.expect("closing a fenced log");
        let reopened = open_t0(&storage, dir.path()).await;
        let end = reopened.offsets().log_end;
        assert!(
            end == Offset(3) || end == Offset(6),
            "the failed batch is whole or absent: {end}"
        );
        let again = reopened
            .append(&one_batch(4), 0)
            .await
            .expect("appends after reopen");
        assert_eq!(again.base_offset, end);
        again.durable.await.expect("durable after reopen");
        reopened.close().await.expect("close");
        storage.shutdown().await;
    });
}

fn idempotent(seq: i32, epoch: i16) -> ProducePayload {
    let b = weir_client::record_batch::build_idempotent_batch(
        3,
        b"idem",
        0,
        weir_client::record_batch::Producer {
            id: 7,
            epoch,
            base_sequence: seq,
        },
    );
    ProducePayload::validate(Bytes::from(b), 1 << 20).expect("valid")
}

#[test]
fn idempotent_retries_are_not_stored_twice_even_after_reopen() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open_t0(&storage, dir.path()).await;
        let first = log.append(&idempotent(0, 0), 0).await.expect("append");
        assert_eq!(first.base_offset, Offset(0));
        let retry = log.append(&idempotent(0, 0), 0).await.expect("retry");
        assert_eq!(
            (retry.base_offset, retry.last_offset),
            (Offset(0), Offset(2))
        );
        retry.durable.await.expect("durable with the original");
        assert_eq!(log.offsets().log_end, Offset(3), "stored once");
        let gap = log.append(&idempotent(6, 0), 0).await;
        assert!(matches!(
            gap,
            Err(StorageError::Sequence(SequenceError::OutOfOrder {
                expected: 3,
                got: 6,
                ..
            }))
        ));
        let next = log.append(&idempotent(3, 0), 0).await.expect("in order");
        assert_eq!(next.base_offset, Offset(3));
        next.durable.await.expect("durable");
        log.close().await.expect("close");

        let reopened = open_t0(&storage, dir.path()).await;
        let retry = reopened
            .append(&idempotent(3, 0), 0)
            .await
            .expect("retry after reopen");
        assert_eq!(retry.base_offset, Offset(3), "state rebuilt from the log");
        assert_eq!(reopened.offsets().log_end, Offset(6));
        reopened
            .append(&idempotent(0, 1), 0)
            .await
            .expect("new epoch")
            .durable
            .await
            .expect("durable");
        let zombie = reopened.append(&idempotent(6, 0), 0).await;
        assert!(matches!(
            zombie,
            Err(StorageError::Sequence(SequenceError::StaleEpoch { .. }))
        ));
        reopened.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn a_followers_high_watermark_is_its_leaders_as_far_as_it_holds_it() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open_t0(&storage, dir.path()).await;
        for seq in 0..3 {
            let appended = log
                .append(&idempotent(seq * 3, 0), 0)
                .await
                .expect("append");
            appended.durable.await.expect("durable");
        }
        assert_eq!(log.high_watermark(), Offset(9), "not replicated: durable");
        log.follow_high_watermark(Offset(4));
        assert_eq!(log.high_watermark(), Offset(4), "back to the leader's");
        log.follow_high_watermark(Offset(100));
        assert_eq!(log.high_watermark(), Offset(9), "no further than it holds");
        log.close().await.expect("close");
        // Reopened (a restart): everything local counts until the leader says less.
        let reopened = open_t0(&storage, dir.path()).await;
        assert_eq!(reopened.high_watermark(), Offset(9));
        reopened.follow_high_watermark(Offset(6));
        assert_eq!(reopened.high_watermark(), Offset(6));
        reopened.close().await.expect("close");
        storage.shutdown().await;
    });
}

#[test]
fn closing_while_appends_stream_in_keeps_everything_made_durable() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        for round in 0..20u64 {
            let log = open_t0(&storage, dir.path()).await;
            let durable_max = Rc::new(std::cell::Cell::new(Offset(0)));
            let writer = {
                let (log, durable_max) = (log.clone(), Rc::clone(&durable_max));
                glommio::spawn_local(async move {
                    let mut waits = Vec::new();
                    // Bounded (a close that never comes must not fill the disk), and
                    // yielding so the close and the flushes get their turns.
                    for _ in 0..5_000 {
                        glommio::executor().yield_task_queue_now().await;
                        let Ok(a) = log.append(&one_batch(7), 0).await else {
                            break;
                        };
                        let (end, durable_max) = (a.last_offset, Rc::clone(&durable_max));
                        waits.push(glommio::spawn_local(async move {
                            if a.durable.await.is_ok() {
                                durable_max.set(durable_max.get().max(Offset(end.0 + 1)));
                            }
                        }));
                    }
                    for w in waits {
                        w.await;
                    }
                })
            };
            glommio::timer::sleep(std::time::Duration::from_millis(3 + round % 7)).await;
            log.close().await.expect("close");
            writer.await;
            let reopened = open_t0(&storage, dir.path()).await;
            assert!(
                reopened.log_end() >= durable_max.get(),
                "round {round}: reopened at {:?}, {:?} was durable",
                reopened.log_end(),
                durable_max.get()
            );
            reopened.close().await.expect("close");
        }
        storage.shutdown().await;
    });
}

#[test]
fn failed_fdatasync_fences_the_partition_until_reopened() {
    fails_then_fences("fdatasync", 5);
}

#[test]
fn failed_write_fences_the_partition_until_reopened() {
    fails_then_fences("write", 28);
}

/// A rolled segment's name is made durable by the round that makes its first appends
/// durable (not on the append path): while the directory's fdatasync fails, appends to
/// the old segment are acknowledged, the first append to the new one is not.
#[test]
fn a_new_segments_first_appends_wait_for_its_directory_entry() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        let log = storage
            .open_log(&dir.path().join("t-0"), config)
            .await
            .expect("open")
            .0;
        // The first segment's name is synced with its first append.
        let first = log.append(&one_batch(1), 0).await.expect("append");
        first.durable.await.expect("durable");
        failpoint::arm("fsync dir", libc::EIO);
        let mut rolled = false;
        for seed in 2..40 {
            let segments = log.offsets().segments;
            let appended = log.append(&one_batch(seed), 0).await.expect("in memory");
            if log.offsets().segments == segments {
                appended.durable.await.expect("no directory sync needed");
                continue;
            }
            let err = appended.durable.await.expect_err("the name is not durable");
            assert!(
                matches!(&err, StorageError::Fenced { reason, .. } if reason.raw_os_error == Some(libc::EIO)),
                "{err}"
            );
            rolled = true;
            break;
        }
        assert!(rolled, "a 4 KiB segment rolls");
        assert!(
            failpoint::check("fsync dir").is_none(),
            "consumed by the roll's round"
        );
        log.close().await.expect("close a fenced log");
        storage.shutdown().await;
    });
}

/// Rounds are pipelined: while one round's fdatasync stalls, the next writes — here
/// across rolls, so a sealing segment's last flush is in flight when the next round
/// begins. Every acknowledged append is there, in order, after a reopen.
#[test]
fn appends_across_rolls_while_fdatasyncs_stall_are_all_kept() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        let path = dir.path().join("t-0");
        let log = storage
            .open_log(&path, config.clone())
            .await
            .expect("open")
            .0;
        for _ in 0..30 {
            failpoint::arm_stall("fdatasync", std::time::Duration::from_millis(5));
        }
        let mut waits = Vec::new();
        for seed in 0..60u8 {
            let appended = log.append(&one_batch(seed), 0).await.expect("append");
            waits.push(appended.durable);
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
        for durable in waits {
            durable.await.expect("durable");
        }
        assert!(log.offsets().segments > 10, "4 KiB segments rolled");
        log.close().await.expect("close");
        let log = storage.open_log(&path, config).await.expect("reopen").0;
        assert_eq!(log.log_end(), Offset(180));
        let batches = super::recycle_tests::read_all(&log).await;
        assert_eq!(batches.len(), 60, "every batch, intact, offsets dense");
        log.close().await.expect("close");
        storage.shutdown().await;
    });
}

/// A round that begins while the one before it syncs (rounds are pipelined) and then
/// learns that round failed does not acknowledge its appends, though its own fdatasync
/// succeeded: they follow appends that may be lost.
#[test]
fn appends_in_a_round_begun_before_a_failed_sync_finished_fail_too() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let log = open_t0(&storage, dir.path()).await;
        failpoint::arm_stall("fdatasync", std::time::Duration::from_millis(50));
        failpoint::arm("fdatasync", libc::EIO);
        let first = log.append(&one_batch(1), 0).await.expect("append");
        glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
        let second = log.append(&one_batch(2), 0).await.expect("in memory");
        let both_rounds = storage
            .flusher()
            .round_after(storage.flusher().rounds() + 1);
        first.durable.await.expect_err("its fdatasync failed");
        let err = second
            .durable
            .await
            .expect_err("it follows a failed append");
        assert!(matches!(&err, StorageError::Fenced { .. }), "{err}");
        both_rounds.await;
        assert_eq!(
            log.high_watermark(),
            Offset(0),
            "the second round, finished after the fence, acknowledged nothing"
        );
        log.close().await.expect("close a fenced log");
        storage.shutdown().await;
    });
}

#[test]
fn a_replica_promoted_to_leader_answers_a_retry_of_what_it_copied() {
    let dir = test_dir();
    run(async move {
        let storage = start_storage(dir.path()).await;
        let leader = open_t0(&storage, dir.path()).await;
        let follower = storage
            .open_log(&dir.path().join("t-1"), LogConfig::default())
            .await
            .expect("open")
            .0;
        for seq in [0, 3] {
            let a = leader.append(&idempotent(seq, 0), 0).await.expect("append");
            a.durable.await.expect("durable");
        }
        // The follower copies both batches as its leader stored them.
        let copied = leader.read_replica(Offset(0), 1 << 20).await.expect("read");
        let payload = ProducePayload::validate(copied.records, 1 << 20).expect("valid");
        let a = follower.append_replica(&payload).await.expect("copy");
        a.durable.await.expect("durable");
        // Promoted at epoch 1, it gets the producer's retry of the last batch.
        let retry = follower.append(&idempotent(3, 0), 1).await.expect("retry");
        assert_eq!(
            (retry.base_offset, retry.last_offset),
            (Offset(3), Offset(5))
        );
        assert_eq!(follower.log_end(), Offset(6), "stored once");
        // So does a follower that restarted before it was promoted.
        follower.close().await.expect("close");
        let reopened = storage
            .open_log(&dir.path().join("t-1"), LogConfig::default())
            .await
            .expect("reopen")
            .0;
        let retry = reopened.append(&idempotent(3, 0), 2).await.expect("retry");
        assert_eq!(retry.base_offset, Offset(3));
        assert_eq!(reopened.log_end(), Offset(6), "stored once after a restart");
        let next = reopened.append(&idempotent(6, 0), 2).await.expect("next");
        assert_eq!(next.base_offset, Offset(6));
        for log in [leader, reopened] {
            log.close().await.expect("close");
        }
        storage.shutdown().await;
    });
}
