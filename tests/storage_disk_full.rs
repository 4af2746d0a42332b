//! A full disk: a small ext4 image mounted through a loop device is the data directory.
//! Appends past the free space fail cleanly with ENOSPC, everything acknowledged before
//! stays readable, and once space is freed the reopened log takes appends again.
//! Needs root and loop devices; where mounting is impossible it prints why and skips.

#[allow(dead_code)]
mod common;

use std::time::Duration;

use common::{loop_mount::mount_small_ext4, *};
use weir::storage::{Clock, LogConfig, Offset, StorageError};

#[test]
fn full_disk_fails_appends_cleanly_and_recovers_when_space_is_freed() {
    let dir = scratch_dir();
    let mount = match mount_small_ext4(dir.path(), 24) {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot mount a loop ext4 image here ({why})");
            return;
        }
    };
    let data = mount.0.join("data");
    let filler = mount.0.join("filler");
    std::fs::write(&filler, vec![7u8; 4 << 20]).expect("filler");
    run(async move {
        let storage = start(&data, fsync_every(Duration::ZERO), 1 << 20, Clock::System).await;
        let config = LogConfig {
            segment_bytes: 4 << 20,
            ..LogConfig::default()
        };
        let path = data.join("t-0");
        let (log, _) = storage.open_log(&path, config.clone()).await.expect("open");
        let mut acked = Vec::new();
        let mut failure = None;
        for i in 0..2000u64 {
            let p = payload(1, 16, 4000, i, i as i64);
            let result = match log.append(&p, 0).await {
                Ok(appended) => appended.durable.await.map(|()| appended.base_offset),
                Err(e) => Err(e),
            };
            match result {
                Ok(base) => acked.push((base, bytes::Bytes::copy_from_slice(&p.as_bytes()[16..]))),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let failure = failure.expect("a 24 MiB disk fills up");
        let errno = match &failure {
            StorageError::Fenced { reason, .. } => reason.raw_os_error,
            StorageError::Io { source, .. } => source.raw_os_error(),
            other => panic!("unexpected error {other}"),
        };
        assert_eq!(errno, Some(28), "ENOSPC: {failure}");
        assert!(
            acked.len() > 100,
            "the disk held {} batches first",
            acked.len()
        );
        let check = |batches: Vec<StoredBatch>, acked: &[(Offset, bytes::Bytes)]| {
            assert!(batches.len() >= acked.len());
            for ((base, suffix), got) in acked.iter().zip(&batches) {
                assert_eq!((Offset(got.base_offset), &got.suffix), (*base, suffix));
            }
        };
        check(read_all(&log, 1 << 20).await, &acked);
        log.close().await.expect("close");
        std::fs::remove_file(&filler).expect("free space");
        let (reopened, _) = storage.open_log(&path, config).await.expect("reopen");
        check(read_all(&reopened, 1 << 20).await, &acked);
        let again = reopened
            .append(&payload(1, 16, 4000, 9, 0), 0)
            .await
            .expect("append");
        again.durable.await.expect("durable once space is free");
        reopened.close().await.expect("close");
        storage.shutdown().await;
    });
    drop(mount);
}
