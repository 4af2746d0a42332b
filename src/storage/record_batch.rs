//! Zero-copy validation of Kafka RecordBatch v2 bytes.
//!
//! A produce request carries one or more record batches back to back. The broker never
//! decodes the records inside them: it checks the fixed 61-byte header, the declared
//! length against the bytes present, the record count against `lastOffsetDelta`, and the
//! CRC-32C that Kafka computes over everything from `attributes` to the end of the batch.
//! What passes is stored exactly as sent, except for the two header fields that lie
//! outside the CRC and belong to the broker: `baseOffset` and `partitionLeaderEpoch`.
//!
//! Layout of the header (all integers big-endian), as in Kafka's `DefaultRecordBatch`
//! (the field positions come from `weir_client::record_batch`, shared with the clients):
//!
//! ```text
//! 0  baseOffset            i64   rewritten by the broker
//! 8  batchLength           i32   bytes after this field
//! 12 partitionLeaderEpoch  i32   rewritten by the broker
//! 16 magic                 i8    must be 2
//! 17 crc                   u32   CRC-32C of bytes 21..end
//! 21 attributes            i16
//! 23 lastOffsetDelta       i32
//! 27 baseTimestamp         i64
//! 35 maxTimestamp          i64
//! 43 producerId            i64
//! 51 producerEpoch         i16
//! 53 baseSequence          i32
//! 57 recordCount           i32
//! 61 records ...
//! ```

use bytes::Bytes;

use super::Offset;

use weir_client::record_batch::{
    be_i16, be_i32, be_i64, ATTRIBUTES_AT, BASE_SEQUENCE_AT, BASE_TIMESTAMP_AT, BATCH_LENGTH_AT,
    CRC_AT, CRC_COVERED_FROM, LAST_OFFSET_DELTA_AT, LEADER_EPOCH_AT, MAGIC_AT, MAX_TIMESTAMP_AT,
    PRODUCER_EPOCH_AT, PRODUCER_ID_AT, RECORD_COUNT_AT,
};
pub use weir_client::record_batch::{
    ATTRIBUTE_CONTROL, ATTRIBUTE_LOG_APPEND_TIME, ATTRIBUTE_TRANSACTIONAL,
};
pub use weir_client::record_batch::{HEADER_BYTES, LOG_OVERHEAD_BYTES, MAGIC_V2};

/// Bytes at the start of a batch that the broker rewrites before storing it.
pub const REWRITTEN_PREFIX_BYTES: usize = 16;

const _: () = assert!(RECORD_COUNT_AT + 4 == HEADER_BYTES);
const _: () = assert!(LEADER_EPOCH_AT + 4 == REWRITTEN_PREFIX_BYTES);
const _: () = assert!(REWRITTEN_PREFIX_BYTES <= MAGIC_AT);

/// Why a byte string is not an acceptable RecordBatch v2. Each rejection is its own
/// variant so the broker can map it to the Kafka error code a client expects
/// (`CORRUPT_MESSAGE`, `MESSAGE_TOO_LARGE`, `INVALID_RECORD`, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Fewer bytes remain than a batch header needs.
    #[error("truncated record batch: {available} bytes left, a header needs {HEADER_BYTES}")]
    TruncatedHeader {
        /// Bytes left in the buffer at the batch's start.
        available: usize,
    },
    /// `batchLength` is too small to hold the header.
    #[error("record batch length {declared} is smaller than the header")]
    LengthTooSmall {
        /// The declared `batchLength`.
        declared: i32,
    },
    /// `batchLength` runs past the end of the buffer.
    #[error("record batch declares {declared} bytes but only {available} follow")]
    LengthBeyondBuffer {
        /// Total size the batch declares (`batchLength` + 12).
        declared: usize,
        /// Bytes left in the buffer at the batch's start.
        available: usize,
    },
    /// The batch is larger than the configured maximum.
    #[error("record batch of {size} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Total size of the batch.
        size: usize,
        /// The configured limit.
        max: usize,
    },
    /// `magic` is not 2.
    #[error("unsupported record batch magic {0}, only v2 is accepted")]
    UnsupportedMagic(i8),
    /// The stored CRC does not match the bytes.
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC-32C read from the header.
        stored: u32,
        /// CRC-32C computed over attributes..end.
        computed: u32,
    },
    /// `recordCount` is zero or negative.
    #[error("record batch has invalid record count {0}")]
    InvalidRecordCount(i32),
    /// `lastOffsetDelta + 1` disagrees with `recordCount`.
    #[error("record batch lastOffsetDelta {last_offset_delta} does not match record count {record_count}")]
    OffsetDeltaMismatch {
        /// The declared `lastOffsetDelta`.
        last_offset_delta: i32,
        /// The declared `recordCount`.
        record_count: i32,
    },
    /// A produce payload held no batch at all.
    #[error("record set is empty")]
    Empty,
    /// A control batch whose record is not a version-0 COMMIT or ABORT marker.
    #[error("control batch at offset {0} is not a transaction marker")]
    InvalidMarker(i64),
}

/// A validated RecordBatch v2: a view over bytes whose header, length and CRC have been
/// checked. Holding one is proof that the bytes are a well-formed batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordBatch<'a> {
    bytes: &'a [u8],
}

/// The fields of a batch header that locating and indexing need, readable from the first
/// [`HEADER_BYTES`] of a stored batch without touching the records or the CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// `baseOffset` as stored.
    pub base_offset: i64,
    /// Total size of the batch in bytes, header included.
    pub total_bytes: usize,
    /// `lastOffsetDelta`.
    pub last_offset_delta: i32,
    /// `maxTimestamp`.
    pub max_timestamp: i64,
    /// `magic`.
    pub magic: i8,
    /// `producerId`, or -1.
    pub producer_id: i64,
    /// `producerEpoch`.
    pub producer_epoch: i16,
    /// `baseSequence`, or -1.
    pub base_sequence: i32,
    /// `partitionLeaderEpoch`.
    pub leader_epoch: i32,
    /// `attributes`.
    pub attributes: i16,
}

impl BatchHeader {
    /// Reads the header at the start of `bytes`. Returns `None` when fewer than
    /// [`HEADER_BYTES`] bytes are present or the declared length cannot hold a header;
    /// checks nothing else (the CRC is [`RecordBatch::validate`]'s job).
    pub fn parse(bytes: &[u8]) -> Option<BatchHeader> {
        if bytes.len() < HEADER_BYTES {
            return None;
        }
        let length = be_i32(bytes, BATCH_LENGTH_AT);
        if length < (HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32 {
            return None;
        }
        Some(BatchHeader {
            base_offset: be_i64(bytes, 0),
            total_bytes: length as usize + LOG_OVERHEAD_BYTES,
            last_offset_delta: be_i32(bytes, LAST_OFFSET_DELTA_AT),
            max_timestamp: be_i64(bytes, MAX_TIMESTAMP_AT),
            magic: bytes[MAGIC_AT] as i8,
            producer_id: be_i64(bytes, PRODUCER_ID_AT),
            producer_epoch: be_i16(bytes, PRODUCER_EPOCH_AT),
            base_sequence: be_i32(bytes, BASE_SEQUENCE_AT),
            leader_epoch: be_i32(bytes, LEADER_EPOCH_AT),
            attributes: be_i16(bytes, ATTRIBUTES_AT),
        })
    }

    /// True for a batch of a transaction (data or marker).
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTRIBUTE_TRANSACTIONAL != 0
    }

    /// True for a control batch (a transaction marker).
    pub fn is_control(&self) -> bool {
        self.attributes & ATTRIBUTE_CONTROL != 0
    }

    /// The offset of the last record, `baseOffset + lastOffsetDelta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }
}

impl<'a> RecordBatch<'a> {
    /// Validates the batch at the start of `bytes` and returns it with the bytes that
    /// follow it. Checks, in order: a whole header is present, `batchLength` fits the
    /// header and the buffer, the batch is at most `max_bytes`, magic is 2, the record
    /// count is positive and agrees with `lastOffsetDelta`, and the CRC-32C matches.
    pub fn validate(
        bytes: &'a [u8],
        max_bytes: usize,
    ) -> Result<(RecordBatch<'a>, &'a [u8]), BatchError> {
        let size = check(bytes, max_bytes)?;
        let (batch, rest) = bytes.split_at(size);
        Ok((RecordBatch { bytes: batch }, rest))
    }

    /// As [`validate`](Self::validate), for a batch as a log stores it (see
    /// [`check_stored`]): a compacted batch may hold fewer records than offsets.
    pub fn validate_stored(
        bytes: &'a [u8],
        max_bytes: usize,
    ) -> Result<(RecordBatch<'a>, &'a [u8]), BatchError> {
        let size = check_stored(bytes, max_bytes)?;
        let (batch, rest) = bytes.split_at(size);
        Ok((RecordBatch { bytes: batch }, rest))
    }

    /// The stored bytes of the batch, header included.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Total size of the batch in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false: a validated batch holds at least a header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Offsets the batch spans, `lastOffsetDelta + 1`: its record count for a batch as
    /// produced, more when compaction removed records.
    pub fn offset_count(&self) -> u64 {
        self.last_offset_delta() as u64 + 1
    }

    /// `recordCount`: records in the batch (at most [`offset_count`](Self::offset_count)).
    pub fn record_count(&self) -> u32 {
        be_i32(self.bytes, RECORD_COUNT_AT) as u32
    }

    /// `baseOffset` as the client sent it (normally 0).
    pub fn base_offset(&self) -> i64 {
        be_i64(self.bytes, 0)
    }

    /// `attributes`: compression codec, timestamp type, transactional and control bits.
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, ATTRIBUTES_AT)
    }

    /// True for a batch of a transaction (data or marker).
    pub fn is_transactional(&self) -> bool {
        self.attributes() & ATTRIBUTE_TRANSACTIONAL != 0
    }

    /// True for a control batch (a transaction marker).
    pub fn is_control(&self) -> bool {
        self.attributes() & ATTRIBUTE_CONTROL != 0
    }

    /// `baseTimestamp`, the timestamp of the first record.
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.bytes, BASE_TIMESTAMP_AT)
    }

    /// `maxTimestamp`, the largest record timestamp in the batch.
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.bytes, MAX_TIMESTAMP_AT)
    }

    /// `producerId`, or -1 for a producer without idempotence.
    pub fn producer_id(&self) -> i64 {
        be_i64(self.bytes, PRODUCER_ID_AT)
    }

    /// `producerEpoch`.
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.bytes, PRODUCER_EPOCH_AT)
    }

    /// `baseSequence`, or -1 for a producer without idempotence.
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.bytes, BASE_SEQUENCE_AT)
    }

    /// `lastOffsetDelta`.
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.bytes, LAST_OFFSET_DELTA_AT)
    }

    /// `partitionLeaderEpoch`: the epoch of the leader that appended the batch (as
    /// stored; a producer sends -1).
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.bytes, LEADER_EPOCH_AT)
    }

    /// The first [`REWRITTEN_PREFIX_BYTES`] of the batch as they must be stored once the
    /// broker has assigned `base_offset` and stamped `leader_epoch`. The CRC does not
    /// cover these bytes, so the rest of the batch is stored unchanged after them.
    pub fn rewritten_prefix(&self, base_offset: Offset, leader_epoch: i32) -> [u8; 16] {
        let mut prefix = [0u8; REWRITTEN_PREFIX_BYTES];
        prefix[..8].copy_from_slice(&base_offset.to_wire().to_be_bytes());
        prefix[BATCH_LENGTH_AT..LEADER_EPOCH_AT]
            .copy_from_slice(&self.bytes[BATCH_LENGTH_AT..LEADER_EPOCH_AT]);
        prefix[LEADER_EPOCH_AT..].copy_from_slice(&leader_epoch.to_be_bytes());
        prefix
    }

    /// The batch bytes after the rewritten prefix; stored as sent.
    pub fn unchanged_suffix(&self) -> &'a [u8] {
        &self.bytes[REWRITTEN_PREFIX_BYTES..]
    }
}

/// Runs every check of [`RecordBatch::validate`] on the batch at the start of `bytes`
/// and returns its size. For callers that hold plain slices (recovery scans).
pub fn check(bytes: &[u8], max_bytes: usize) -> Result<usize, BatchError> {
    check_as(bytes, max_bytes, Form::Produced)
}

/// As [`check`], for a batch as a log may store it once compacted: its records may be
/// fewer than its offsets (`0 <= recordCount <= lastOffsetDelta + 1`), since compaction
/// drops records but keeps the batch's offset range, as Kafka does.
pub fn check_stored(bytes: &[u8], max_bytes: usize) -> Result<usize, BatchError> {
    check_as(bytes, max_bytes, Form::Stored)
}

/// Which record counts a batch may declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// As a producer sends it: one record per offset.
    Produced,
    /// As a log stores it: compaction may have removed records.
    Stored,
}

fn check_as(bytes: &[u8], max_bytes: usize, form: Form) -> Result<usize, BatchError> {
    let available = bytes.len();
    if available < HEADER_BYTES {
        return Err(BatchError::TruncatedHeader { available });
    }
    let declared = be_i32(bytes, BATCH_LENGTH_AT);
    if declared < (HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32 {
        return Err(BatchError::LengthTooSmall { declared });
    }
    let size = declared as usize + LOG_OVERHEAD_BYTES;
    if size > available {
        return Err(BatchError::LengthBeyondBuffer {
            declared: size,
            available,
        });
    }
    if size > max_bytes {
        return Err(BatchError::TooLarge {
            size,
            max: max_bytes,
        });
    }
    let magic = bytes[MAGIC_AT] as i8;
    if magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic(magic));
    }
    let record_count = be_i32(bytes, RECORD_COUNT_AT);
    let least = match form {
        Form::Produced => 1,
        Form::Stored => 0,
    };
    if record_count < least {
        return Err(BatchError::InvalidRecordCount(record_count));
    }
    let last_offset_delta = be_i32(bytes, LAST_OFFSET_DELTA_AT);
    let offsets = i64::from(last_offset_delta) + 1;
    let fits = match form {
        Form::Produced => offsets == i64::from(record_count),
        Form::Stored => last_offset_delta >= 0 && offsets >= i64::from(record_count),
    };
    if !fits {
        return Err(BatchError::OffsetDeltaMismatch {
            last_offset_delta,
            record_count,
        });
    }
    let stored = u32::from_be_bytes([
        bytes[CRC_AT],
        bytes[CRC_AT + 1],
        bytes[CRC_AT + 2],
        bytes[CRC_AT + 3],
    ]);
    let computed = crc32c::crc32c(&bytes[CRC_COVERED_FROM..size]);
    if stored != computed {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    Ok(size)
}

/// The batches of one produce payload, all validated. Validation fails on the first bad
/// batch, so a payload is stored whole or not at all. Holds the request's bytes without
/// copying them and allocates nothing.
#[derive(Debug, Clone)]
pub struct ProducePayload {
    bytes: Bytes,
    batch_count: usize,
    record_count: u64,
    offset_count: u64,
}

impl ProducePayload {
    /// Validates every batch in `payload` (batches laid back to back, as in a produce
    /// request's `records` field), each at most `max_batch_bytes`.
    pub fn validate(payload: Bytes, max_batch_bytes: usize) -> Result<ProducePayload, BatchError> {
        Self::validate_as(payload, max_batch_bytes, Form::Produced)
    }

    /// As [`validate`](Self::validate), for batches a log stored (a leader's, fetched by
    /// its follower): compacted batches may hold fewer records than offsets.
    pub fn validate_stored(
        payload: Bytes,
        max_batch_bytes: usize,
    ) -> Result<ProducePayload, BatchError> {
        Self::validate_as(payload, max_batch_bytes, Form::Stored)
    }

    fn validate_as(
        payload: Bytes,
        max_batch_bytes: usize,
        form: Form,
    ) -> Result<ProducePayload, BatchError> {
        let mut rest: &[u8] = &payload;
        let mut batch_count = 0;
        let mut record_count = 0;
        let mut offset_count = 0;
        while !rest.is_empty() {
            let size = check_as(rest, max_batch_bytes, form)?;
            let (bytes, tail) = rest.split_at(size);
            let batch = RecordBatch { bytes };
            record_count += u64::from(batch.record_count());
            offset_count += batch.offset_count();
            batch_count += 1;
            rest = tail;
        }
        if batch_count == 0 {
            return Err(BatchError::Empty);
        }
        Ok(ProducePayload {
            bytes: payload,
            batch_count,
            record_count,
            offset_count,
        })
    }

    /// A copy with every batch stamped with the broker's append time, as Kafka does for a
    /// topic whose `message.timestamp.type` is LogAppendTime: the timestamp-type
    /// attribute set, `maxTimestamp` = `now_ms`, the CRC sealed again (both fields are
    /// covered by it). Batch and record counts are unchanged, so nothing is validated
    /// again. Record timestamps stay as sent; readers take every record's time from
    /// `maxTimestamp` for such a batch.
    pub fn with_log_append_time(&self, now_ms: i64) -> ProducePayload {
        let mut out = self.bytes.to_vec();
        let mut at = 0;
        for batch in self.batches() {
            let b = &mut out[at..at + batch.len()];
            let attributes = batch.attributes() | ATTRIBUTE_LOG_APPEND_TIME;
            b[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
            b[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&now_ms.to_be_bytes());
            let crc = crc32c::crc32c(&b[CRC_COVERED_FROM..]);
            b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
            at += batch.len();
        }
        ProducePayload {
            bytes: Bytes::from(out),
            batch_count: self.batch_count,
            record_count: self.record_count,
            offset_count: self.offset_count,
        }
    }

    /// The validated batches in the order they were sent.
    pub fn batches(&self) -> impl Iterator<Item = RecordBatch<'_>> + '_ {
        let mut rest: &[u8] = &self.bytes;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            // Validated at construction: the declared lengths are known to fit.
            let size = be_i32(rest, BATCH_LENGTH_AT) as usize + LOG_OVERHEAD_BYTES;
            let (batch, tail) = rest.split_at(size);
            rest = tail;
            Some(RecordBatch { bytes: batch })
        })
    }

    /// Number of batches.
    pub fn batch_count(&self) -> usize {
        self.batch_count
    }

    /// Records across all batches; the number of offsets the append will assign.
    pub fn record_count(&self) -> u64 {
        self.record_count
    }

    /// Offsets the batches span: their record count, unless compaction removed records
    /// from a stored batch (see [`ProducePayload::validate_stored`]).
    pub fn offset_count(&self) -> u64 {
        self.offset_count
    }

    /// Bytes across all batches.
    pub fn total_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The payload as received.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use weir_client::record_batch::{build_batch, seal_crc};

    use super::*;

    fn batch(count: u32) -> Bytes {
        Bytes::from(build_batch(count, b"hello", 1_000))
    }

    #[test]
    fn valid_batch_passes_and_reports_its_fields() {
        let bytes = batch(3);
        let (b, rest) = RecordBatch::validate(&bytes, 1 << 20).expect("valid");
        assert!(rest.is_empty());
        assert_eq!(b.record_count(), 3);
        assert_eq!(b.base_timestamp(), 1_000);
        assert_eq!(b.max_timestamp(), 1_002);
        assert_eq!(b.producer_id(), -1);
        assert_eq!(b.len(), bytes.len());
    }

    #[test]
    fn several_batches_in_one_payload_are_all_validated() {
        let mut payload = build_batch(2, b"a", 0);
        payload.extend(build_batch(5, b"bb", 10));
        let p = ProducePayload::validate(Bytes::from(payload), 1 << 20).expect("valid");
        assert_eq!(p.batches().count(), 2);
        assert_eq!(p.batch_count(), 2);
        assert_eq!(p.record_count(), 7);
    }

    #[test]
    fn empty_payload_is_rejected() {
        assert_eq!(
            ProducePayload::validate(Bytes::new(), 100).unwrap_err(),
            BatchError::Empty
        );
    }

    #[test]
    fn each_defect_has_its_own_error() {
        let good = build_batch(2, b"xyz", 5);
        let check = |mutate: &dyn Fn(&mut Vec<u8>), want: &dyn Fn(&BatchError) -> bool| {
            let mut b = good.clone();
            mutate(&mut b);
            let err = RecordBatch::validate(&b, 1 << 20).unwrap_err();
            assert!(want(&err), "unexpected {err:?}");
        };
        check(&|b| b.truncate(40), &|e| {
            matches!(e, BatchError::TruncatedHeader { available: 40 })
        });
        check(&|b| b[8..12].copy_from_slice(&10i32.to_be_bytes()), &|e| {
            matches!(e, BatchError::LengthTooSmall { declared: 10 })
        });
        check(&|b| b.truncate(b.len() - 1), &|e| {
            matches!(e, BatchError::LengthBeyondBuffer { .. })
        });
        check(&|b| b[16] = 1, &|e| {
            matches!(e, BatchError::UnsupportedMagic(1))
        });
        check(
            &|b| {
                let last = b.len() - 1;
                b[last] ^= 0x40;
            },
            &|e| matches!(e, BatchError::CrcMismatch { .. }),
        );
        check(
            &|b| {
                b[57..61].copy_from_slice(&0i32.to_be_bytes());
                seal_crc(b);
            },
            &|e| matches!(e, BatchError::InvalidRecordCount(0)),
        );
        check(
            &|b| {
                b[23..27].copy_from_slice(&7i32.to_be_bytes());
                seal_crc(b);
            },
            &|e| matches!(e, BatchError::OffsetDeltaMismatch { .. }),
        );
        let err = RecordBatch::validate(&good, 20).unwrap_err();
        assert!(matches!(err, BatchError::TooLarge { max: 20, .. }));
    }

    #[test]
    fn rewritten_prefix_keeps_the_crc_valid() {
        let bytes = batch(4);
        let (b, _) = RecordBatch::validate(&bytes, 1 << 20).expect("valid");
        let mut stored = b.rewritten_prefix(Offset(1234), 7).to_vec();
        stored.extend_from_slice(b.unchanged_suffix());
        let (again, _) = RecordBatch::validate(&stored, 1 << 20).expect("valid");
        assert_eq!(again.base_offset(), 1234);
        assert_eq!(be_i32(again.as_bytes(), LEADER_EPOCH_AT), 7);
        let h = BatchHeader::parse(again.as_bytes()).expect("header");
        assert_eq!(h.last_offset(), 1237);
        assert_eq!(h.total_bytes, bytes.len());
    }

    #[test]
    fn header_parse_refuses_short_or_impossible_lengths() {
        assert!(BatchHeader::parse(&[0u8; 60]).is_none());
        assert!(
            BatchHeader::parse(&[0u8; 61]).is_none(),
            "zeroed bytes are no batch"
        );
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = ProducePayload::validate(Bytes::from(data), 1 << 20);
        }

        #[test]
        fn any_single_bit_flip_after_the_prefix_is_caught(count in 1u32..20, bit in 0usize..4096) {
            let mut b = build_batch(count, b"payload", 42);
            let span = (b.len() - REWRITTEN_PREFIX_BYTES) * 8;
            let bit = REWRITTEN_PREFIX_BYTES * 8 + bit % span;
            b[bit / 8] ^= 1 << (bit % 8);
            proptest::prop_assert!(RecordBatch::validate(&b, 1 << 20).is_err());
        }
    }

    #[test]
    fn stamping_log_append_time_keeps_a_valid_batch() {
        let mut payload = build_batch(3, b"a", 1_000);
        payload.extend(build_batch(2, b"b", 2_000));
        let p = ProducePayload::validate(Bytes::from(payload), 1 << 20).expect("valid");
        let stamped = p.with_log_append_time(99_000);
        let again =
            ProducePayload::validate(stamped.as_bytes().clone(), 1 << 20).expect("still valid");
        for b in again.batches() {
            assert_eq!(b.max_timestamp(), 99_000);
            assert_ne!(b.attributes() & ATTRIBUTE_LOG_APPEND_TIME, 0);
        }
        assert_eq!(again.record_count(), 5);
    }
}
