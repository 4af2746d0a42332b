//! A partition log as a replica: a follower's appends of what its leader stored, the
//! commit cap replication sets on the high watermark, stepping down, and cutting a
//! divergent tail.

use std::{
    io::{Read, Seek, SeekFrom},
    path::Path,
};

use super::{Appended, PartitionLog, Stamp};
use crate::storage::{
    record_batch::{BatchHeader, HEADER_BYTES},
    segment::SegmentPaths,
    segment_files::{remove_if_present, sync_dir_blocking},
    Offset, ProducePayload, Result, StorageError,
};

impl PartitionLog {
    /// Appends batches a leader stored, keeping their offsets and leader epochs; the
    /// first must start at this log's end. Durable when [`Appended::durable`] (waited
    /// for as `Wait::Local`) resolves.
    pub async fn append_replica(&self, payload: &ProducePayload) -> Result<Appended> {
        self.append_as(payload, Stamp::Replica).await
    }

    /// What replication allows to count as committed: the high watermark never passes
    /// `cap` (nor what is durable here), and moves up to it when it can. On a leader,
    /// the least durable end over the ISR; on a follower, its leader's high watermark.
    pub fn set_commit_cap(&self, cap: Offset) {
        self.cap_high_watermark(cap, false);
    }

    /// On a follower, the high watermark its leader sent: the commit cap, and the high
    /// watermark itself as far as this replica holds it (Kafka's follower high watermark,
    /// min(leader's, log end)) — even when that is lower. A log opened after a restart
    /// or a cut starts with its high watermark at its log end, which may be past what was
    /// committed, and a new leader's high watermark can trail its predecessor's; followers
    /// serve no reads, so nobody saw the higher value, and a follower elected leader then
    /// starts from one that is committed.
    pub fn follow_high_watermark(&self, leader_hw: Offset) {
        self.cap_high_watermark(leader_hw, true);
    }

    /// Sets the commit cap (first lowering the high watermark to it when `lower`) and
    /// moves the high watermark up as far as it allows, waking what waited for that.
    fn cap_high_watermark(&self, cap: Offset, lower: bool) {
        let mut st = self.shared.state.borrow_mut();
        st.commit_cap = Some(cap);
        let before = st.high_watermark;
        if lower {
            st.high_watermark = st.high_watermark.min(cap).max(st.log_start);
        }
        st.advance_high_watermark();
        if st.high_watermark <= before {
            return;
        }
        let woken = st.ready_waiters();
        drop(st);
        woken.into_iter().for_each(std::task::Waker::wake);
        // Long-polling consumers look again.
        self.shared.env.flusher.watermarks_moved();
    }

    /// This replica stopped leading: appends still waiting to be committed fail (the
    /// new leader may cut them), those already committed are unaffected.
    pub fn step_down(&self) {
        let mut st = self.shared.state.borrow_mut();
        st.step_downs += 1;
        let woken = std::mem::take(&mut st.waiters);
        drop(st);
        woken.into_iter().for_each(|(_, w)| w.wake());
    }

    /// One past the last offset durable on this replica.
    pub fn durable_end(&self) -> Offset {
        self.shared.state.borrow().durable_end
    }

    /// One past the last offset appended.
    pub fn log_end(&self) -> Offset {
        self.shared.state.borrow().log_end
    }
}

/// Cuts the closed log in `dir` so it ends just before `offset`: later segments are
/// deleted, the segment holding `offset` is cut at that batch and its indexes removed
/// (opening the log rebuilds them). `offset` must be a batch boundary, as the ends of
/// leader epochs are. Blocking: run it on the blocking pool, with the log closed.
fn cut_log_dir(dir: &Path, offset: Offset) -> Result<()> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| StorageError::io("list", dir, e))? {
        let entry = entry.map_err(|e| StorageError::io("list", dir, e))?;
        let name = entry.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".log")) else {
            continue;
        };
        if let Ok(base) = stem.parse::<u64>() {
            bases.push(Offset(base));
        }
    }
    bases.sort();
    // Index files go before their log, so none outlives it: a segment later created
    // under the same name would otherwise find another life's entries in them.
    for base in &bases {
        let paths = SegmentPaths::new(dir, *base);
        if *base >= offset {
            remove_if_present(&paths.index)?;
            remove_if_present(&paths.time_index)?;
            remove_if_present(&paths.log)?;
        }
    }
    match bases.iter().rev().find(|b| **b < offset) {
        Some(base) => {
            let paths = SegmentPaths::new(dir, *base);
            cut_segment(&paths.log, offset)?;
            remove_if_present(&paths.index)?;
            remove_if_present(&paths.time_index)?;
        }
        None => {
            // Everything went: an empty segment keeps the log's end where it was cut.
            let paths = SegmentPaths::new(dir, offset);
            std::fs::File::create(&paths.log)
                .map_err(|e| StorageError::io("create", &paths.log, e))?;
        }
    }
    sync_dir_blocking(dir)
}

/// Cuts the segment file at `path` before the first batch at or past `offset`.
fn cut_segment(path: &Path, offset: Offset) -> Result<()> {
    let io = |op| move |e| StorageError::io(op, path, e);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io("open"))?;
    let len = file.metadata().map_err(io("stat"))?.len();
    let mut position = 0u64;
    let mut header = [0u8; HEADER_BYTES];
    while position + HEADER_BYTES as u64 <= len {
        file.seek(SeekFrom::Start(position)).map_err(io("seek"))?;
        file.read_exact(&mut header).map_err(io("read"))?;
        let Some(h) = BatchHeader::parse(&header) else {
            break;
        };
        if h.base_offset < 0 || h.base_offset as u64 >= offset.0 {
            break;
        }
        position += h.total_bytes as u64;
    }
    file.set_len(position.min(len)).map_err(io("truncate"))?;
    file.sync_all().map_err(io("fsync"))
}

/// Empties the closed log in `dir` so that it starts (and ends) at `start`: every file
/// goes, highest segments first (a crash part-way leaves a shorter log, which the next
/// attempt empties), and one empty segment based at `start` is created. Blocking: run
/// it on the blocking pool, with the log closed.
fn restart_log_dir(dir: &Path, start: Offset) -> Result<()> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| StorageError::io("list", dir, e))? {
        let entry = entry.map_err(|e| StorageError::io("list", dir, e))?;
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            files.push(entry.path());
        }
    }
    // Segment names are zero-padded offsets: reverse name order is highest first.
    files.sort();
    for path in files.iter().rev() {
        std::fs::remove_file(path).map_err(|e| StorageError::io("remove", path, e))?;
    }
    let paths = SegmentPaths::new(dir, start);
    std::fs::File::create(&paths.log).map_err(|e| StorageError::io("create", &paths.log, e))?;
    sync_dir_blocking(dir)
}

/// How a follower's log is truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// A divergent tail: the log ends just before this offset (a batch boundary).
    Tail(Offset),
    /// The leader's log starts past this log's end: everything goes and the log starts
    /// again, empty, at the leader's log start (Kafka's truncateFullyAndStartAt).
    RestartAt(Offset),
}

/// Truncates the closed log in `dir` as `how` says, off the reactor. The shard closes a
/// follower's log, truncates it and opens it again.
pub async fn cut_log(dir: &Path, how: Truncation) -> Result<()> {
    let owned = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || match how {
            Truncation::Tail(offset) => cut_log_dir(&owned, offset),
            Truncation::RestartAt(start) => restart_log_dir(&owned, start),
        })
        .await
}
