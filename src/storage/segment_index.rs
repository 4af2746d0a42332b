//! The sparse indexes beside each segment: `.index` maps a batch's offset (relative to
//! the segment's base offset) to its byte position in the `.log`; `.timeindex` maps the
//! largest timestamp seen so far to the last offset of the batch that reached it.
//!
//! Both are kept whole in memory (8 bytes per `index_interval_bytes` of log, 0.2% of the
//! log at the default 4 KiB interval) and lookups are binary searches. The files use
//! Kafka's layouts, big-endian: `.index` entries are `relativeOffset u32, position u32`
//! (8 bytes), `.timeindex` entries are `timestamp i64, relativeOffset u32` (12 bytes).
//!
//! Index files are derived data: they are written with the log but not fsynced with it,
//! and recovery checks them against the log ([`OffsetIndex::decode`] keeps only the
//! longest valid prefix) and rebuilds what is missing.

use super::{FilePosition, Offset};

/// Timestamp meaning "no timestamp seen yet" (Kafka's `RecordBatch.NO_TIMESTAMP`).
pub const NO_TIMESTAMP: i64 = -1;

/// Size of one `.index` entry on disk.
pub const OFFSET_ENTRY_BYTES: usize = 8;
/// Size of one `.timeindex` entry on disk.
pub const TIME_ENTRY_BYTES: usize = 12;

/// One offset index entry: the batch whose base offset is `base + relative_offset`
/// starts at `position` in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    /// Offset relative to the segment's base offset.
    pub relative_offset: u32,
    /// Byte position of the batch in the segment's log.
    pub position: u32,
}

/// One time index entry: every batch up to and including the one whose last offset is
/// `base + relative_offset` has a max timestamp of at most `timestamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    /// Largest record timestamp seen in the segment so far, in ms.
    pub timestamp: i64,
    /// Last offset of the batch that was appended when the entry was made, relative.
    pub relative_offset: u32,
}

/// True when `bytes` are all zeros: what follows an index file's entries.
pub(crate) fn is_zero_padding(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

/// The in-memory offset index of one segment. Entries are strictly increasing in both
/// offset and position.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<OffsetEntry>,
}

impl OffsetIndex {
    /// Decodes an `.index` file, keeping the longest prefix of entries that is strictly
    /// increasing in offset and position and whose positions lie below `log_bytes`.
    /// Returns the index and whether the file was clean: everything after that prefix
    /// is zero padding (what a crash between a write and its truncation leaves).
    pub fn decode(bytes: &[u8], log_bytes: u64) -> (OffsetIndex, bool) {
        let mut index = OffsetIndex::default();
        let whole = bytes.len() / OFFSET_ENTRY_BYTES * OFFSET_ENTRY_BYTES;
        for raw in bytes[..whole].chunks_exact(OFFSET_ENTRY_BYTES) {
            let entry = OffsetEntry {
                relative_offset: u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]),
                position: u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]),
            };
            let increasing = index.entries.last().is_none_or(|last| {
                entry.relative_offset > last.relative_offset && entry.position > last.position
            });
            if !increasing || u64::from(entry.position) >= log_bytes || entry.position == 0 {
                let rest = &bytes[index.entries.len() * OFFSET_ENTRY_BYTES..];
                return (index, is_zero_padding(rest));
            }
            index.entries.push(entry);
        }
        (index, is_zero_padding(&bytes[whole..]))
    }

    /// Appends an entry. Panics if it does not extend the index strictly upwards: that
    /// would be a bug in the appender, never a property of input.
    pub fn push(&mut self, entry: OffsetEntry) {
        if let Some(last) = self.entries.last() {
            assert!(
                entry.relative_offset > last.relative_offset && entry.position > last.position,
                "offset index must grow: {last:?} then {entry:?}"
            );
        }
        self.entries.push(entry);
    }

    /// The position to start scanning from to find `relative_offset`: the position of
    /// the last indexed batch whose base offset is at most `relative_offset`, or 0.
    pub fn lookup(&self, relative_offset: u32) -> FilePosition {
        let after = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        match after {
            0 => FilePosition(0),
            n => FilePosition(u64::from(self.entries[n - 1].position)),
        }
    }

    /// Drops every entry at or past `position` (after the log was truncated there).
    pub fn truncate_to_position(&mut self, position: FilePosition) {
        let keep = self
            .entries
            .partition_point(|e| u64::from(e.position) < position.0);
        self.entries.truncate(keep);
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[OffsetEntry] {
        &self.entries
    }

    /// Encodes one entry as stored in the `.index` file.
    pub fn encode_entry(entry: OffsetEntry) -> [u8; OFFSET_ENTRY_BYTES] {
        let mut out = [0u8; OFFSET_ENTRY_BYTES];
        out[..4].copy_from_slice(&entry.relative_offset.to_be_bytes());
        out[4..].copy_from_slice(&entry.position.to_be_bytes());
        out
    }

    /// Encodes the whole index as the `.index` file's contents.
    pub fn encode(&self) -> Vec<u8> {
        self.entries
            .iter()
            .flat_map(|e| OffsetIndex::encode_entry(*e))
            .collect()
    }
}

/// The in-memory time index of one segment. Timestamps strictly increase and relative
/// offsets never decrease.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<TimeEntry>,
}

impl TimeIndex {
    /// Decodes a `.timeindex` file, keeping the longest prefix whose timestamps strictly
    /// increase, whose offsets do not decrease and stay below `next_relative_offset`,
    /// ended by an all-zero entry: that is padding, as in a new or recycled file (so a
    /// real entry of timestamp 0 at relative offset 0 makes the file read as damaged,
    /// and recovery rebuilds it from the log). Returns the index and whether the file
    /// was clean (only zero padding after it).
    pub fn decode(bytes: &[u8], next_relative_offset: u64) -> (TimeIndex, bool) {
        let mut index = TimeIndex::default();
        let whole = bytes.len() / TIME_ENTRY_BYTES * TIME_ENTRY_BYTES;
        for raw in bytes[..whole].chunks_exact(TIME_ENTRY_BYTES) {
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&raw[..8]);
            let entry = TimeEntry {
                timestamp: i64::from_be_bytes(ts),
                relative_offset: u32::from_be_bytes([raw[8], raw[9], raw[10], raw[11]]),
            };
            let ordered = index.entries.last().is_none_or(|last| {
                entry.timestamp > last.timestamp && entry.relative_offset >= last.relative_offset
            });
            if !ordered
                || u64::from(entry.relative_offset) >= next_relative_offset
                || is_zero_padding(raw)
            {
                let rest = &bytes[index.entries.len() * TIME_ENTRY_BYTES..];
                return (index, is_zero_padding(rest));
            }
            index.entries.push(entry);
        }
        (index, is_zero_padding(&bytes[whole..]))
    }

    /// Records that the segment's largest timestamp grew to `timestamp` with the batch
    /// ending at `relative_offset`. Ignored unless `timestamp` exceeds the last entry's;
    /// returns whether an entry was added.
    pub fn maybe_push(&mut self, entry: TimeEntry) -> bool {
        if let Some(last) = self.entries.last() {
            if entry.timestamp <= last.timestamp {
                return false;
            }
            assert!(entry.relative_offset >= last.relative_offset);
        }
        self.entries.push(entry);
        true
    }

    /// The last entry whose timestamp is strictly below `timestamp`: every batch up to
    /// its offset is older than `timestamp`, so a search can start after it.
    pub fn last_before(&self, timestamp: i64) -> Option<TimeEntry> {
        let n = self.entries.partition_point(|e| e.timestamp < timestamp);
        n.checked_sub(1).map(|i| self.entries[i])
    }

    /// Drops every entry whose offset is at or past `next_relative_offset`.
    pub fn truncate_to_offset(&mut self, next_relative_offset: u64) {
        let keep = self
            .entries
            .partition_point(|e| u64::from(e.relative_offset) < next_relative_offset);
        self.entries.truncate(keep);
    }

    /// The newest entry.
    pub fn last(&self) -> Option<TimeEntry> {
        self.entries.last().copied()
    }

    /// Encodes one entry as stored in the `.timeindex` file.
    pub fn encode_entry(entry: TimeEntry) -> [u8; TIME_ENTRY_BYTES] {
        let mut out = [0u8; TIME_ENTRY_BYTES];
        out[..8].copy_from_slice(&entry.timestamp.to_be_bytes());
        out[8..].copy_from_slice(&entry.relative_offset.to_be_bytes());
        out
    }

    /// Encodes the whole index as the `.timeindex` file's contents.
    pub fn encode(&self) -> Vec<u8> {
        self.entries
            .iter()
            .flat_map(|e| TimeIndex::encode_entry(*e))
            .collect()
    }
}

/// What indexing needs to know about one appended batch.
#[derive(Debug, Clone, Copy)]
pub struct IndexedBatch {
    /// Where the batch starts in the log.
    pub position: FilePosition,
    /// Its base offset.
    pub base_offset: Offset,
    /// Its last offset.
    pub last_offset: Offset,
    /// Its `maxTimestamp`.
    pub max_timestamp: i64,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Entries that indexing one batch added, to be appended to the index files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NewEntries {
    /// A new `.index` entry.
    pub offset: Option<OffsetEntry>,
    /// A new `.timeindex` entry.
    pub time: Option<TimeEntry>,
}

/// Both indexes of one segment and the bookkeeping that decides when to add entries.
/// Appends and recovery replay go through [`SegmentIndex::track`], so replaying the same
/// batches from an index entry rebuilds exactly the entries the appends made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentIndex {
    base: Offset,
    interval_bytes: u64,
    offsets: OffsetIndex,
    times: TimeIndex,
    bytes_since_entry: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: Offset,
}

impl SegmentIndex {
    /// An empty index for the segment starting at `base`, adding an entry after every
    /// `interval_bytes` of log (Kafka's `index.interval.bytes`).
    pub fn new(base: Offset, interval_bytes: u64) -> SegmentIndex {
        SegmentIndex {
            base,
            interval_bytes,
            offsets: OffsetIndex::default(),
            times: TimeIndex::default(),
            bytes_since_entry: 0,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: base,
        }
    }

    /// Accounts for one batch appended at the end of the log; returns the entries it
    /// added. Kafka's rule: an entry for a batch once more than `interval_bytes` were
    /// appended since the previous entry, and a time entry with it when the largest
    /// timestamp grew.
    pub fn track(&mut self, batch: IndexedBatch) -> NewEntries {
        if batch.max_timestamp > self.max_timestamp {
            self.max_timestamp = batch.max_timestamp;
            self.offset_of_max_timestamp = batch.last_offset;
        }
        let mut added = NewEntries::default();
        if self.bytes_since_entry > self.interval_bytes {
            let entry = OffsetEntry {
                relative_offset: self.relative(batch.base_offset),
                position: batch.position.0 as u32,
            };
            self.offsets.push(entry);
            added.offset = Some(entry);
            added.time = self.push_time_entry();
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry += batch.bytes;
        added
    }

    fn push_time_entry(&mut self) -> Option<TimeEntry> {
        let entry = TimeEntry {
            timestamp: self.max_timestamp,
            relative_offset: self.relative(self.offset_of_max_timestamp),
        };
        self.times.maybe_push(entry).then_some(entry)
    }

    /// The final time entry Kafka writes when a segment stops being active, so the
    /// time index's last entry is the segment's largest timestamp.
    pub fn seal_time_entry(&mut self) -> Option<TimeEntry> {
        if self.max_timestamp == NO_TIMESTAMP {
            return None;
        }
        self.push_time_entry()
    }

    fn relative(&self, offset: Offset) -> u32 {
        u32::try_from(offset.0 - self.base.0).expect("segment offsets fit 32 bits")
    }

    /// Builds the index from decoded files and prepares to replay the log from the
    /// last offset entry: entries at or after it are dropped and will be re-made by
    /// [`track`](Self::track). Returns where replay starts and the base offset the batch
    /// there must have.
    pub fn resume(
        base: Offset,
        interval_bytes: u64,
        mut offsets: OffsetIndex,
        mut times: TimeIndex,
    ) -> (SegmentIndex, FilePosition, Offset) {
        let resume_at = offsets.entries().last().copied();
        let (position, expected, bytes_since_entry) = match resume_at {
            // More than an interval preceded this entry, or the append would not have
            // made it; replaying with that state makes the same entry again.
            Some(e) => (
                FilePosition(u64::from(e.position)),
                Offset(base.0 + u64::from(e.relative_offset)),
                interval_bytes + 1,
            ),
            None => (FilePosition(0), base, 0),
        };
        offsets.truncate_to_position(position);
        if position.0 == 0 {
            times = TimeIndex::default();
        } else {
            times.truncate_to_offset(expected.0 - base.0);
        }
        let (max_timestamp, offset_of_max_timestamp) = match times.last() {
            Some(t) => (t.timestamp, Offset(base.0 + u64::from(t.relative_offset))),
            None => (NO_TIMESTAMP, base),
        };
        (
            SegmentIndex {
                base,
                interval_bytes,
                offsets,
                times,
                bytes_since_entry,
                max_timestamp,
                offset_of_max_timestamp,
            },
            position,
            expected,
        )
    }

    /// Position to start scanning from to find `offset` (see [`OffsetIndex::lookup`]).
    pub fn lookup(&self, offset: Offset) -> FilePosition {
        self.offsets.lookup(self.relative(offset.max(self.base)))
    }

    /// Where to start scanning for the first batch with a timestamp at or above
    /// `timestamp`: the offset after the last time entry below it, or the base offset.
    pub fn first_offset_at_or_after(&self, timestamp: i64) -> Offset {
        match self.times.last_before(timestamp) {
            Some(e) => Offset(self.base.0 + u64::from(e.relative_offset) + 1),
            None => self.base,
        }
    }

    /// The largest timestamp in the segment, or [`NO_TIMESTAMP`].
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// The last offset of the batch holding the largest timestamp.
    pub fn offset_of_max_timestamp(&self) -> Offset {
        self.offset_of_max_timestamp
    }

    /// The segment's base offset.
    pub fn base(&self) -> Offset {
        self.base
    }

    /// The offset index.
    pub fn offsets(&self) -> &OffsetIndex {
        &self.offsets
    }

    /// The time index.
    pub fn times(&self) -> &TimeIndex {
        &self.times
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_of(entries: &[(u32, u32)]) -> OffsetIndex {
        let mut i = OffsetIndex::default();
        for &(relative_offset, position) in entries {
            i.push(OffsetEntry {
                relative_offset,
                position,
            });
        }
        i
    }

    #[test]
    fn lookup_finds_the_last_entry_at_or_below() {
        let i = index_of(&[(10, 4096), (20, 8192), (30, 12288)]);
        assert_eq!(i.lookup(0), FilePosition(0));
        assert_eq!(i.lookup(9), FilePosition(0));
        assert_eq!(i.lookup(10), FilePosition(4096));
        assert_eq!(i.lookup(25), FilePosition(8192));
        assert_eq!(i.lookup(u32::MAX), FilePosition(12288));
    }

    #[test]
    fn decode_round_trips_and_stops_at_the_first_bad_entry() {
        let i = index_of(&[(10, 4096), (20, 8192), (30, 12288)]);
        let bytes = i.encode();
        assert_eq!(OffsetIndex::decode(&bytes, 20_000), (i.clone(), true));
        let (short, whole) = OffsetIndex::decode(&bytes, 10_000);
        assert!(!whole);
        assert_eq!(short.entries().len(), 2, "entry beyond the log is dropped");
        let mut zeroed = bytes.clone();
        zeroed.extend_from_slice(&[0u8; 8]);
        let (z, clean) = OffsetIndex::decode(&zeroed, 20_000);
        assert!(clean, "zeros after the entries are padding");
        assert_eq!(z, i, "a zeroed tail entry is not an entry");
        let mut garbage = bytes.clone();
        garbage.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        assert!(
            !OffsetIndex::decode(&garbage, 20_000).1,
            "garbage is not padding"
        );
        let (torn, whole) = OffsetIndex::decode(&bytes[..bytes.len() - 3], 20_000);
        assert!(!whole);
        assert_eq!(torn.entries().len(), 2);
    }

    #[test]
    fn truncation_drops_entries_at_or_past_the_cut() {
        let mut i = index_of(&[(10, 4096), (20, 8192)]);
        i.truncate_to_position(FilePosition(8192));
        assert_eq!(i.entries().len(), 1);
    }

    #[test]
    fn time_index_only_grows_with_new_maxima() {
        let mut t = TimeIndex::default();
        assert!(t.maybe_push(TimeEntry {
            timestamp: 100,
            relative_offset: 3
        }));
        assert!(!t.maybe_push(TimeEntry {
            timestamp: 100,
            relative_offset: 9
        }));
        assert!(t.maybe_push(TimeEntry {
            timestamp: 200,
            relative_offset: 9
        }));
        assert_eq!(t.last_before(100), None);
        assert_eq!(t.last_before(150).map(|e| e.relative_offset), Some(3));
        assert_eq!(t.last_before(201).map(|e| e.relative_offset), Some(9));
        let (d, whole) = TimeIndex::decode(&t.encode(), 10);
        assert!(whole);
        assert_eq!(d, t);
        let (d, whole) = TimeIndex::decode(&t.encode(), 9);
        assert!(!whole);
        assert_eq!(d.last().map(|e| e.timestamp), Some(100));
    }
}
