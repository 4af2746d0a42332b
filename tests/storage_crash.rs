//! Crash and corruption recovery on real files: durable appends, a "crash" (the
//! executor stops without closing anything), then damage to the files: torn, zeroed or
//! bit-flipped tails, lost or garbage index files, truncation anywhere. Reopening must
//! give a prefix of what was appended, with every acknowledged batch kept whenever the
//! damage lies past it, and every read intact. Seeds are printed on failure.

#[allow(dead_code)]
mod common;

use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use common::{
    mutation::{fuzz_seconds, mutate},
    rng::Rng,
    *,
};
use weir::storage::{record_batch::BatchHeader, Clock, LogConfig, Offset};

fn config() -> LogConfig {
    small_segments(24 << 10)
}

/// Where one batch lies on disk.
#[derive(Debug, Clone)]
struct Located {
    file: PathBuf,
    position: u64,
    len: u64,
    base: u64,
}

/// Every intact-looking batch in the partition's `.log` files, in offset order.
fn locate_batches(dir: &Path) -> Vec<Located> {
    let mut logs: Vec<PathBuf> = fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let mut out = Vec::new();
    for file in logs {
        let bytes = fs::read(&file).expect("read log");
        let mut at = 0usize;
        while let Some(h) = BatchHeader::parse(&bytes[at..]) {
            if at + h.total_bytes > bytes.len() {
                break;
            }
            out.push(Located {
                file: file.clone(),
                position: at as u64,
                len: h.total_bytes as u64,
                base: h.base_offset as u64,
            });
            at += h.total_bytes;
        }
    }
    out
}

/// Appends `payloads` payloads of random shape, each acknowledged, then stops without
/// closing. Returns the batches as written.
fn write_and_crash(dir: &Path, seed: u64, payloads: usize) -> Vec<StoredBatch> {
    write_with_and_crash(dir, seed, payloads, config(), false)
}

/// [`write_and_crash`] with `config`, enforcing retention after each payload when
/// `retention` (then new segments overwrite recycled files); returns the batches from
/// the log start.
fn write_with_and_crash(
    dir: &Path,
    seed: u64,
    payloads: usize,
    config: LogConfig,
    retention: bool,
) -> Vec<StoredBatch> {
    let dir = dir.to_path_buf();
    run(async move {
        let storage = start(&dir, fsync_every(Duration::ZERO), 1 << 20, Clock::System).await;
        let (log, _) = storage
            .open_log(&dir.join("t-0"), config)
            .await
            .expect("open");
        let mut rng = Rng(seed);
        for i in 0..payloads {
            let p = payload(
                1 + rng.below(3) as usize,
                1 + rng.below(5) as u32,
                rng.below(1200) as usize,
                seed ^ i as u64,
                i as i64,
            );
            append_durably(&log, &p).await;
            if retention {
                log.enforce_retention().await.expect("retention");
            }
        }
        if retention {
            assert!(
                storage.pool().files() > 0 || payloads < 100,
                "files retired"
            );
        }
        read_all(&log, 1 << 20).await
    })
}

fn reopen_and_read(
    dir: &Path,
) -> (
    Vec<StoredBatch>,
    Vec<weir::storage::recovery::RecoveryReport>,
) {
    reopen_and_read_with(dir, config())
}

fn reopen_and_read_with(
    dir: &Path,
    config: LogConfig,
) -> (
    Vec<StoredBatch>,
    Vec<weir::storage::recovery::RecoveryReport>,
) {
    let dir = dir.to_path_buf();
    run(async move {
        let storage = start(&dir, fsync_every(Duration::ZERO), 1 << 20, Clock::System).await;
        let (log, reports) = storage
            .open_log(&dir.join("t-0"), config)
            .await
            .expect("reopen");
        let batches = read_all(&log, 7000).await;
        // The repaired log takes new appends after what survived.
        let end = log.offsets().log_end;
        let appended = log
            .append(&payload(1, 2, 10, 7, 0), 0)
            .await
            .expect("append after recovery");
        assert_eq!(appended.base_offset, end);
        appended.durable.await.expect("durable");
        log.close().await.expect("close");
        // Files dropped without an explicit close are closed on the reactor's next I/O
        // cycle; give it one, or a long fuzz run exhausts file descriptors.
        drop(log);
        glommio::timer::sleep(Duration::from_millis(1)).await;
        (batches, reports)
    })
}

fn flip_bit(file: &Path, position: u64) {
    let mut bytes = fs::read(file).expect("read");
    let bit = position as usize * 8 + (position as usize % 8);
    bytes[bit / 8] ^= 1 << (bit % 8);
    fs::write(file, bytes).expect("write");
}

fn truncate(file: &Path, len: u64) {
    fs::OpenOptions::new()
        .write(true)
        .open(file)
        .expect("open")
        .set_len(len)
        .expect("truncate");
}

fn zero_from(file: &Path, position: u64, len: u64) {
    let mut bytes = fs::read(file).expect("read");
    let end = (position + len).min(bytes.len() as u64) as usize;
    bytes[position as usize..end].fill(0);
    fs::write(file, bytes).expect("write");
}

#[test]
fn damage_past_the_acknowledged_prefix_loses_nothing_acknowledged() {
    for seed in 1..=24u64 {
        let dir = scratch_dir();
        let written = write_and_crash(dir.path(), seed, 40);
        let partition = dir.path().join("t-0");
        let located = locate_batches(&partition);
        assert_eq!(located.len(), written.len(), "seed {seed}");
        let mut rng = Rng(seed * 7919);
        // The last few batches play the unacknowledged tail: damage starts in batch k.
        let k = written.len() - 1 - rng.below(4.min(written.len() as u64 - 1)) as usize;
        let victim = &located[k];
        let damage = rng.below(4);
        match damage {
            0 => truncate(&victim.file, victim.position + rng.below(victim.len)),
            1 => zero_from(
                &victim.file,
                victim.position + rng.below(victim.len),
                1 + rng.below(5000),
            ),
            2 => {
                // Anything but the leader epoch (bytes 12..16), which no checksum covers.
                let mut at = rng.below(victim.len);
                if (12..16).contains(&at) {
                    at = 16;
                }
                flip_bit(&victim.file, victim.position + at);
            }
            _ => {
                let garbage: Vec<u8> = (0..rng.below(300) + 1).map(|_| rng.next() as u8).collect();
                let mut bytes = fs::read(&victim.file).expect("read");
                bytes.truncate(victim.position as usize);
                bytes.extend_from_slice(&garbage);
                fs::write(&victim.file, bytes).expect("write");
            }
        }
        for l in &located {
            if rng.below(4) == 0 {
                let _ = fs::remove_file(l.file.with_extension("index"));
            }
            if rng.below(6) == 0 {
                let garbage: Vec<u8> = (0..40).map(|_| rng.next() as u8 | 1).collect();
                fs::write(l.file.with_extension("timeindex"), garbage).expect("write");
            }
        }
        let (recovered, reports) = reopen_and_read(dir.path());
        assert_eq!(
            recovered.len(),
            k,
            "seed {seed} damage {damage}: batches before the damaged one are all kept, none after"
        );
        assert_eq!(
            &recovered[..],
            &written[..k],
            "seed {seed}: kept batches are intact"
        );
        assert!(
            reports.iter().any(|r| r.truncated_bytes > 0) || damage == 0,
            "seed {seed}: {reports:?}"
        );
        let _ = victim.base;
    }
}

#[test]
fn arbitrary_truncation_leaves_an_intact_dense_prefix() {
    for seed in 100..124u64 {
        let dir = scratch_dir();
        let written = write_and_crash(dir.path(), seed, 30);
        let partition = dir.path().join("t-0");
        let located = locate_batches(&partition);
        let mut rng = Rng(seed);
        let victim = &located[rng.below(located.len() as u64) as usize];
        let file_len = fs::metadata(&victim.file).expect("stat").len();
        truncate(&victim.file, rng.below(file_len + 1));
        if rng.below(2) == 0 {
            let _ = fs::remove_file(victim.file.with_extension("index"));
            let _ = fs::remove_file(victim.file.with_extension("timeindex"));
        }
        let (recovered, _) = reopen_and_read(dir.path());
        assert!(recovered.len() <= written.len(), "seed {seed}");
        assert_eq!(
            &recovered[..],
            &written[..recovered.len()],
            "seed {seed}: a prefix, intact"
        );
        let first_lost = located
            .iter()
            .position(|l| l.file == victim.file)
            .expect("victim located");
        assert!(
            recovered.len() >= first_lost,
            "seed {seed}: earlier segments are untouched"
        );
    }
}

#[test]
fn crash_without_damage_recovers_everything_and_rebuilds_lost_indexes() {
    let dir = scratch_dir();
    let written = write_and_crash(dir.path(), 4242, 60);
    let partition = dir.path().join("t-0");
    for entry in fs::read_dir(&partition).expect("list") {
        let p = entry.expect("entry").path();
        if p.extension()
            .is_some_and(|e| e == "index" || e == "timeindex")
        {
            fs::remove_file(p).expect("remove index");
        }
    }
    let (recovered, reports) = reopen_and_read(dir.path());
    assert_eq!(recovered, written);
    assert!(
        reports.iter().filter(|r| r.index_rebuilt).count() >= 2,
        "{reports:?}"
    );
    assert!(
        reports.iter().all(|r| r.truncated_bytes == 0),
        "{reports:?}"
    );
    assert!(fs::metadata(partition.join(format!("{:020}.index", 0))).is_ok());
    let _ = Offset(0);
}

/// The files of a partition directory, by name.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .expect("list")
        .map(|e| {
            let path = e.expect("entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .expect("utf-8 file name")
                .to_owned();
            (name, fs::read(&path).expect("read"))
        })
        .collect();
    files.sort();
    files
}

/// Fuzz target for recovery on real files: a crashed log's last segment (its written
/// part) and its index files are mutated at random — `common::mutation`'s bit flips,
/// random bytes, insertions, deletions, truncation, extreme lengths — and the broker's
/// storage reopens them. Reopening must succeed, keep every batch that lies wholly
/// before the first damaged byte, return only an intact prefix of what was written, and
/// take new appends. Runs for `WEIR_FUZZ_SECONDS` (default 3); longer by hand with
/// `WEIR_FUZZ_SECONDS=600 cargo test --release --test storage_crash fuzz -- --nocapture`.
#[test]
fn fuzzed_segment_and_index_files_recover_to_an_intact_prefix() {
    let template = scratch_dir();
    let written = write_and_crash(template.path(), 77, 40);
    let partition = template.path().join("t-0");
    let located = locate_batches(&partition);
    let last_log = located.last().expect("batches").file.clone();
    let last_name = last_log
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_owned();
    let in_last: Vec<&Located> = located.iter().filter(|l| l.file == last_log).collect();
    let before_last = located.len() - in_last.len();
    let data_end = in_last.last().map_or(0, |l| (l.position + l.len) as usize);
    let files = snapshot(&partition);
    let index_names = [
        last_name.replace(".log", ".index"),
        last_name.replace(".log", ".timeindex"),
    ];

    let mut rng = Rng::from_env("segment recovery fuzzing");
    let deadline = std::time::Instant::now() + Duration::from_secs(fuzz_seconds());
    let mut executions = 0u64;
    while std::time::Instant::now() < deadline {
        let case = rng.state();
        let dir = scratch_dir();
        let target = dir.path().join("t-0");
        fs::create_dir_all(&target).expect("mkdir");
        // Where the first damaged byte of the last segment lies (its data end if none).
        let mut first_damage = data_end;
        let damage_log = rng.below(4) != 0;
        for (name, bytes) in &files {
            let mut bytes = bytes.clone();
            if *name == last_name && damage_log {
                let written_part = (data_end + 512).min(bytes.len());
                let mutated = mutate(&mut rng, &bytes[..written_part]);
                first_damage = bytes[..written_part]
                    .iter()
                    .zip(&mutated)
                    .position(|(a, b)| a != b)
                    .unwrap_or(mutated.len().min(written_part))
                    .min(data_end);
                let rest = bytes.split_off(written_part);
                bytes = mutated;
                bytes.extend(rest);
            } else if index_names.contains(name) {
                match rng.below(4) {
                    0 => continue,
                    1 => bytes = mutate(&mut rng, &bytes),
                    _ => {}
                }
            }
            fs::write(target.join(name), bytes).expect("write");
        }
        let intact = before_last
            + in_last
                .iter()
                .take_while(|l| (l.position + l.len) as usize <= first_damage)
                .count();
        let (recovered, _) = reopen_and_read(dir.path());
        assert!(
            recovered.len() >= intact,
            "case {case} (replay: WEIR_SEED={case}): {} batches recovered, {intact} lay before the damage at byte {first_damage}",
            recovered.len()
        );
        assert_eq!(
            &recovered[..],
            &written[..recovered.len()],
            "case {case}: recovered batches are an intact prefix of those written"
        );
        executions += 1;
    }
    println!("segment recovery fuzzing: {executions} executions");
    assert!(executions > 10);
}

/// A log whose retention keeps three segments, so new segments overwrite recycled files.
fn recycling_config() -> LogConfig {
    LogConfig {
        retention_bytes_max: Some(72 << 10),
        ..config()
    }
}

/// The batches of the segment file at `path` (base offset in its name) that recovery
/// would keep: a dense run from position 0; stale batches past it are not counted.
fn dense_batches(path: &Path) -> Vec<Located> {
    let base: u64 = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("segment name");
    let bytes = fs::read(path).expect("read log");
    let (mut at, mut next, mut out) = (0usize, base, Vec::new());
    while let Some(h) = BatchHeader::parse(&bytes[at..]) {
        if h.base_offset as u64 != next || at + h.total_bytes > bytes.len() {
            break;
        }
        out.push(Located {
            file: path.to_path_buf(),
            position: at as u64,
            len: h.total_bytes as u64,
            base: next,
        });
        next = h.last_offset() as u64 + 1;
        at += h.total_bytes;
    }
    out
}

#[test]
fn recycled_segments_torn_at_the_tail_keep_the_acknowledged_prefix_and_no_stale_batch() {
    let mut stale_tails = 0;
    for seed in 400..412u64 {
        let dir = scratch_dir();
        let written = write_with_and_crash(dir.path(), seed, 160, recycling_config(), true);
        let partition = dir.path().join("t-0");
        let mut logs: Vec<PathBuf> = fs::read_dir(&partition)
            .expect("list")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        logs.sort();
        let active = logs.last().expect("active segment").clone();
        let tail = dense_batches(&active);
        let data_end = tail.last().map_or(0, |b| b.position + b.len) as usize;
        let stale = fs::read(&active).expect("read")[data_end..]
            .iter()
            .any(|&b| b != 0);
        stale_tails += usize::from(stale);
        let mut rng = Rng(seed * 31);
        // Tear one of the active segment's last batches (or none).
        let keep = match tail.len() {
            0 => written.len(),
            n => {
                let k = n - 1 - rng.below(3.min(n as u64 - 1)) as usize;
                let victim = &tail[k];
                if rng.below(2) == 0 {
                    zero_from(
                        &victim.file,
                        victim.position + rng.below(victim.len),
                        1 + rng.below(3000),
                    );
                } else {
                    flip_bit(
                        &victim.file,
                        victim.position + 16 + rng.below(victim.len - 16),
                    );
                }
                written.len() - (n - k)
            }
        };
        let (recovered, _) = reopen_and_read_with(dir.path(), recycling_config());
        assert_eq!(
            &recovered[..],
            &written[..keep],
            "seed {seed} (stale tail present: {stale}): the acknowledged prefix up to the tear, nothing stale after it"
        );
    }
    assert!(
        stale_tails > 0,
        "some active segments overwrote recycled files"
    );
}

/// Clean closes — which keep the active segment's file whole, recycled tail and all, for
/// the next open — and crashes, in random order over one log that recycles its files:
/// every reopen reads back exactly what the life before it acknowledged (from the log
/// start), never a stale batch, and the log takes appends after it.
#[test]
fn clean_closes_and_crashes_in_any_order_keep_exactly_the_acknowledged_batches() {
    let mut kept_tails = 0;
    for seed in 500..506u64 {
        let dir = scratch_dir();
        let mut rng = Rng(seed);
        let mut acknowledged: Vec<StoredBatch> = Vec::new();
        for life in 0..6u64 {
            let clean = rng.below(3) != 0;
            let payloads = 5 + rng.below(40) as usize;
            let shapes = Rng(rng.below(u64::MAX));
            let root = dir.path().to_path_buf();
            let before = acknowledged.clone();
            let (kept, after) = run(async move {
                let storage =
                    start(&root, fsync_every(Duration::ZERO), 1 << 20, Clock::System).await;
                let (log, reports) = storage
                    .open_log(&root.join("t-0"), recycling_config())
                    .await
                    .expect("open");
                let start = log.offsets().log_start.0;
                let expected: Vec<StoredBatch> = before
                    .into_iter()
                    .filter(|b| b.base_offset >= start)
                    .collect();
                assert_eq!(
                    read_all(&log, 1 << 20).await,
                    expected,
                    "seed {seed}, life {life}: what the life before acknowledged"
                );
                let kept = reports.last().is_some_and(|r| r.kept_tail_bytes > 0);
                let mut shapes = shapes;
                for i in 0..payloads {
                    let p = payload(
                        1 + shapes.below(3) as usize,
                        1 + shapes.below(5) as u32,
                        shapes.below(1200) as usize,
                        seed ^ (life << 20) ^ i as u64,
                        i as i64,
                    );
                    append_durably(&log, &p).await;
                    log.enforce_retention().await.expect("retention");
                }
                let after = read_all(&log, 1 << 20).await;
                if clean {
                    log.close().await.expect("close");
                }
                // Otherwise dropped without closing: a crash.
                drop(log);
                glommio::timer::sleep(Duration::from_millis(1)).await;
                (kept, after)
            });
            kept_tails += usize::from(kept);
            acknowledged = after;
        }
    }
    assert!(kept_tails > 0, "some reopens kept a clean close's tail");
}
