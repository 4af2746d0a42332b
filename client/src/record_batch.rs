//! Kafka's RecordBatch v2 as bytes: where each header field sits, building a batch of
//! records with its CRC-32C sealed, and walking the batches of a fetch response.
//!
//! The broker validates and stores batches without decoding records and reads its field
//! offsets from here; clients build and read them with [`BatchBuilder`] and
//! [`walk_batches`]. Layout (big-endian), as in Kafka's `DefaultRecordBatch`:
//! `baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8, crc u32,
//! attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64,
//! producerId i64, producerEpoch i16, baseSequence i32, recordCount i32`, then the
//! records. The CRC covers `attributes` to the end.

use bytes::{BufMut, Bytes, BytesMut};

use crate::varint;

/// Bytes before the first record.
pub const HEADER_BYTES: usize = 61;
/// Bytes before `batchLength` counts: `baseOffset` and `batchLength` themselves.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The only record-batch format weir reads and writes.
pub const MAGIC_V2: i8 = 2;
/// Where `baseOffset` sits.
pub const BASE_OFFSET_AT: usize = 0;
/// Where `batchLength` sits.
pub const BATCH_LENGTH_AT: usize = 8;
/// Where `partitionLeaderEpoch` sits.
pub const LEADER_EPOCH_AT: usize = 12;
/// Where `magic` sits.
pub const MAGIC_AT: usize = 16;
/// Where the CRC-32C sits.
pub const CRC_AT: usize = 17;
/// The CRC covers the bytes from here to the end of the batch.
pub const CRC_COVERED_FROM: usize = 21;
/// Where `attributes` sits.
pub const ATTRIBUTES_AT: usize = 21;
/// Where `lastOffsetDelta` sits.
pub const LAST_OFFSET_DELTA_AT: usize = 23;
/// Where `baseTimestamp` sits.
pub const BASE_TIMESTAMP_AT: usize = 27;
/// Where `maxTimestamp` sits.
pub const MAX_TIMESTAMP_AT: usize = 35;
/// Where `producerId` sits.
pub const PRODUCER_ID_AT: usize = 43;
/// Where `producerEpoch` sits.
pub const PRODUCER_EPOCH_AT: usize = 51;
/// Where `baseSequence` sits.
pub const BASE_SEQUENCE_AT: usize = 53;
/// Where `recordCount` sits.
pub const RECORD_COUNT_AT: usize = 57;
/// The attribute bits naming the compression codec (0 = none).
pub const ATTRIBUTE_COMPRESSION_MASK: i16 = 0x07;
/// The attribute bit marking a batch whose timestamps are the broker's append time.
pub const ATTRIBUTE_LOG_APPEND_TIME: i16 = 0x08;
/// The attribute bit marking a batch of a transaction.
pub const ATTRIBUTE_TRANSACTIONAL: i16 = 0x10;
/// The attribute bit marking a control batch (transaction markers).
pub const ATTRIBUTE_CONTROL: i16 = 0x20;
/// A control record's key type ending a transaction by aborting it.
pub const MARKER_ABORT: i16 = 0;
/// A control record's key type ending a transaction by committing it.
pub const MARKER_COMMIT: i16 = 1;

const _: () = assert!(RECORD_COUNT_AT + 4 == HEADER_BYTES);
const _: () = assert!(BATCH_LENGTH_AT + 4 == LOG_OVERHEAD_BYTES);
const _: () = assert!(CRC_AT + 4 == CRC_COVERED_FROM);

/// Computes the CRC-32C `batch` must carry and writes it into its header. Clients sign
/// batches; the broker never re-signs (the fields it rewrites lie before the CRC).
pub fn seal_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[CRC_COVERED_FROM..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// The producer fields of a batch: an idempotent producer's id, epoch and the sequence
/// of the batch's first record; [`Producer::NONE`] for a plain producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Producer {
    /// `producerId`, -1 for none.
    pub id: i64,
    /// `producerEpoch`, -1 for none.
    pub epoch: i16,
    /// `baseSequence`, -1 for none.
    pub base_sequence: i32,
}

impl Producer {
    /// A producer that is not idempotent.
    pub const NONE: Producer = Producer {
        id: -1,
        epoch: -1,
        base_sequence: -1,
    };
}

/// Builds one uncompressed batch in place, record by record, with no copy of the batch
/// at the end; [`BatchBuilder::finish`] writes the header and the CRC.
pub struct BatchBuilder {
    buf: BytesMut,
    records: i32,
    base_timestamp_ms: i64,
    max_timestamp_ms: i64,
    producer: Producer,
    attributes: i16,
}

impl BatchBuilder {
    /// An empty batch with room for `capacity_bytes` of records, whose timestamps are
    /// relative to `base_timestamp_ms`.
    pub fn new(capacity_bytes: usize, base_timestamp_ms: i64) -> BatchBuilder {
        let mut buf = BytesMut::with_capacity(HEADER_BYTES + capacity_bytes);
        buf.put_bytes(0, HEADER_BYTES);
        BatchBuilder {
            buf,
            records: 0,
            base_timestamp_ms,
            max_timestamp_ms: base_timestamp_ms,
            producer: Producer::NONE,
            attributes: 0,
        }
    }

    /// Marks the batch as part of its producer's open transaction.
    pub fn transactional(mut self) -> BatchBuilder {
        self.attributes |= ATTRIBUTE_TRANSACTIONAL;
        self
    }

    /// Stamps the batch with an idempotent producer's fields.
    pub fn producer(mut self, producer: Producer) -> BatchBuilder {
        self.producer = producer;
        self
    }

    /// Encoded size so far, header included.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Records so far.
    pub fn records(&self) -> u32 {
        self.records as u32
    }

    /// Appends a record with `key` (`None` = null) and `value`, no headers.
    pub fn push(&mut self, timestamp_ms: i64, key: Option<&[u8]>, value: &[u8]) {
        self.push_with(timestamp_ms, key, value.len(), |out| out.put_slice(value));
    }

    /// Appends a record whose `value_bytes`-byte value `write_value` writes straight
    /// into the batch (it must write exactly that many bytes).
    pub fn push_with(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value_bytes: usize,
        write_value: impl FnOnce(&mut BytesMut),
    ) {
        self.push_record(timestamp_ms, key, Some(value_bytes), write_value);
    }

    /// Appends a tombstone: a record of `key` with a null value, which a compacted
    /// topic keeps for `delete.retention.ms` and then removes with the key.
    pub fn push_tombstone(&mut self, timestamp_ms: i64, key: &[u8]) {
        self.push_record(timestamp_ms, Some(key), None, |_| {});
    }

    fn push_record(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value_bytes: Option<usize>,
        write_value: impl FnOnce(&mut BytesMut),
    ) {
        let timestamp_delta = timestamp_ms - self.base_timestamp_ms;
        let offset_delta = i64::from(self.records);
        let key_len = key.map_or(-1, |k| k.len() as i64);
        let value_len = value_bytes.map_or(-1, |n| n as i64);
        let body_bytes = 1
            + varint::len(timestamp_delta)
            + varint::len(offset_delta)
            + varint::len(key_len)
            + key.map_or(0, <[u8]>::len)
            + varint::len(value_len)
            + value_bytes.unwrap_or(0)
            + varint::len(0);
        varint::put(&mut self.buf, body_bytes as i64);
        self.buf.put_u8(0);
        varint::put(&mut self.buf, timestamp_delta);
        varint::put(&mut self.buf, offset_delta);
        varint::put(&mut self.buf, key_len);
        if let Some(key) = key {
            self.buf.put_slice(key);
        }
        varint::put(&mut self.buf, value_len);
        let before = self.buf.len();
        write_value(&mut self.buf);
        debug_assert_eq!(
            self.buf.len() - before,
            value_bytes.unwrap_or(0),
            "value length"
        );
        varint::put(&mut self.buf, 0);
        self.records += 1;
        self.max_timestamp_ms = self.max_timestamp_ms.max(timestamp_ms);
    }

    /// Completes the header (lengths, offsets, timestamps, producer, CRC) and returns
    /// the batch, base offset 0 and partition leader epoch -1, as a producer sends it.
    pub fn finish(mut self) -> Bytes {
        assert!(self.records > 0, "a batch holds at least one record");
        let batch_length = (self.buf.len() - LOG_OVERHEAD_BYTES) as i32;
        let header = &mut self.buf[..HEADER_BYTES];
        header[BATCH_LENGTH_AT..LEADER_EPOCH_AT].copy_from_slice(&batch_length.to_be_bytes());
        header[LEADER_EPOCH_AT..MAGIC_AT].copy_from_slice(&(-1i32).to_be_bytes());
        header[MAGIC_AT] = MAGIC_V2 as u8;
        header[ATTRIBUTES_AT..LAST_OFFSET_DELTA_AT].copy_from_slice(&self.attributes.to_be_bytes());
        header[LAST_OFFSET_DELTA_AT..BASE_TIMESTAMP_AT]
            .copy_from_slice(&(self.records - 1).to_be_bytes());
        header[BASE_TIMESTAMP_AT..MAX_TIMESTAMP_AT]
            .copy_from_slice(&self.base_timestamp_ms.to_be_bytes());
        header[MAX_TIMESTAMP_AT..PRODUCER_ID_AT]
            .copy_from_slice(&self.max_timestamp_ms.to_be_bytes());
        header[PRODUCER_ID_AT..PRODUCER_EPOCH_AT].copy_from_slice(&self.producer.id.to_be_bytes());
        header[PRODUCER_EPOCH_AT..BASE_SEQUENCE_AT]
            .copy_from_slice(&self.producer.epoch.to_be_bytes());
        header[BASE_SEQUENCE_AT..RECORD_COUNT_AT]
            .copy_from_slice(&self.producer.base_sequence.to_be_bytes());
        header[RECORD_COUNT_AT..HEADER_BYTES].copy_from_slice(&self.records.to_be_bytes());
        seal_crc(&mut self.buf);
        self.buf.freeze()
    }
}

/// The control batch that ends transaction `producer`'s open transaction on a
/// partition: one record whose key is `(version 0, MARKER_COMMIT | MARKER_ABORT)` and
/// whose value is `(version 0, coordinator_epoch)`, transactional and control bits set,
/// base sequence -1 — Kafka's `EndTransactionMarker` encoding.
pub fn control_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Bytes {
    let mut key = [0u8; 4];
    let kind = if commit { MARKER_COMMIT } else { MARKER_ABORT };
    key[2..].copy_from_slice(&kind.to_be_bytes());
    let mut value = [0u8; 6];
    value[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
    let mut b = BatchBuilder::new(32, timestamp_ms).producer(Producer {
        id: producer_id,
        epoch: producer_epoch,
        base_sequence: -1,
    });
    b.attributes = ATTRIBUTE_TRANSACTIONAL | ATTRIBUTE_CONTROL;
    b.push(timestamp_ms, Some(&key), &value);
    b.finish()
}

/// The marker type of a control record's key, `MARKER_COMMIT` or `MARKER_ABORT`, or
/// `None` when the key is not a version-0 marker key.
pub fn marker_kind(key: &[u8]) -> Option<i16> {
    (key.len() >= 4 && be_i16(key, 0) == 0)
        .then(|| be_i16(key, 2))
        .filter(|k| *k == MARKER_COMMIT || *k == MARKER_ABORT)
}

/// A batch of `record_count` records (at least one) whose values are all `value`, with
/// null keys and timestamps starting at `base_timestamp_ms`, one millisecond apart, as
/// a plain producer sends it. For tests and benches.
pub fn build_batch(record_count: u32, value: &[u8], base_timestamp_ms: i64) -> Vec<u8> {
    build_idempotent_batch(record_count, value, base_timestamp_ms, Producer::NONE)
}

/// [`build_batch`] stamped with `producer`'s id, epoch and base sequence.
pub fn build_idempotent_batch(
    record_count: u32,
    value: &[u8],
    base_timestamp_ms: i64,
    producer: Producer,
) -> Vec<u8> {
    let mut builder = BatchBuilder::new(
        record_count as usize * (value.len() + 16),
        base_timestamp_ms,
    )
    .producer(producer);
    for i in 0..record_count {
        builder.push(base_timestamp_ms + i64::from(i), None, value);
    }
    builder.finish().to_vec()
}

/// What a fetched batch holds, as far as a consumer needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSummary {
    /// The batch's first offset.
    pub base_offset: i64,
    /// The offset after the batch's last record.
    pub next_offset: i64,
    /// Records in the batch.
    pub records: u32,
    /// The batch's bytes, header included.
    pub bytes: usize,
    /// Its producer id, -1 for none.
    pub producer_id: i64,
    /// For a control batch, its marker: `Some(true)` COMMIT, `Some(false)` ABORT.
    pub marker: Option<bool>,
    /// True for a control batch (no data records).
    pub control: bool,
}

/// Why a fetched batch could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WalkError {
    /// The batch's magic byte is not 2.
    #[error("record batch magic {0} (only v2 is read)")]
    Magic(i8),
    /// A length or count points outside the batch.
    #[error("record batch at offset {0} is malformed")]
    Malformed(i64),
}

/// The big-endian `i16` at `at` in `b` (which must hold it: callers check lengths first).
pub fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

/// The big-endian `i32` at `at` in `b` (which must hold it).
pub fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The big-endian `i64` at `at` in `b` (which must hold it).
pub fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

/// Walks the complete batches in a fetch response's records, calling `on_batch` once per
/// complete batch and then, when `values` is true and `on_batch` returned true, `on_value`
/// with each of its records' values. A partial batch at the end (cut by the fetch's byte
/// limit, as Kafka allows) is skipped. The values of compressed and control batches are
/// not read.
pub fn walk_batches(
    records: &[u8],
    values: bool,
    mut on_batch: impl FnMut(&BatchSummary) -> bool,
    mut on_value: impl FnMut(&[u8]),
) -> Result<(), WalkError> {
    let mut rest = records;
    while rest.len() >= HEADER_BYTES {
        let base_offset = be_i64(rest, BASE_OFFSET_AT);
        let length = be_i32(rest, BATCH_LENGTH_AT);
        let total = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_add(LOG_OVERHEAD_BYTES))
            .filter(|&t| t >= HEADER_BYTES)
            .ok_or(WalkError::Malformed(base_offset))?;
        if total > rest.len() {
            break;
        }
        let batch = &rest[..total];
        let magic = batch[MAGIC_AT] as i8;
        if magic != MAGIC_V2 {
            return Err(WalkError::Magic(magic));
        }
        let attributes = be_i16(batch, ATTRIBUTES_AT);
        let last_offset_delta = be_i32(batch, LAST_OFFSET_DELTA_AT);
        let count = be_i32(batch, RECORD_COUNT_AT);
        let records = u32::try_from(count).map_err(|_| WalkError::Malformed(base_offset))?;
        let control = attributes & ATTRIBUTE_CONTROL != 0;
        let plain = attributes & ATTRIBUTE_COMPRESSION_MASK == 0 && !control;
        let marker = if control {
            first_key(&batch[HEADER_BYTES..])
                .and_then(marker_kind)
                .map(|k| k == MARKER_COMMIT)
        } else {
            None
        };
        let wanted = on_batch(&BatchSummary {
            base_offset,
            next_offset: base_offset + i64::from(last_offset_delta) + 1,
            records,
            bytes: total,
            producer_id: be_i64(batch, PRODUCER_ID_AT),
            marker,
            control,
        });
        if values && plain && wanted {
            walk_records(&batch[HEADER_BYTES..], records, &mut on_value)
                .ok_or(WalkError::Malformed(base_offset))?;
        }
        rest = &rest[total..];
    }
    Ok(())
}

/// The key of the first record of an uncompressed batch body.
fn first_key(mut body: &[u8]) -> Option<&[u8]> {
    let length = usize::try_from(varint::get(&mut body)?).ok()?;
    let mut record = body.get(..length)?.get(1..)?;
    varint::get(&mut record)?;
    varint::get(&mut record)?;
    let key_length = usize::try_from(varint::get(&mut record)?).ok()?;
    record.get(..key_length)
}

fn walk_records(mut body: &[u8], count: u32, on_value: &mut impl FnMut(&[u8])) -> Option<()> {
    for _ in 0..count {
        let length = usize::try_from(varint::get(&mut body)?).ok()?;
        let mut record = body.get(..length)?;
        body = &body[length..];
        record = record.get(1..)?;
        varint::get(&mut record)?;
        varint::get(&mut record)?;
        let key_length = varint::get(&mut record)?;
        if key_length > 0 {
            record = record.get(usize::try_from(key_length).ok()?..)?;
        }
        let value_length = varint::get(&mut record)?;
        if value_length >= 0 {
            on_value(record.get(..usize::try_from(value_length).ok()?)?);
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(values: &[&[u8]]) -> Bytes {
        let mut builder = BatchBuilder::new(4096, 1_700_000_000_000);
        for (i, v) in values.iter().enumerate() {
            builder.push(1_700_000_000_000 + i as i64, None, v);
        }
        builder.finish()
    }

    #[test]
    fn encoded_batch_has_a_valid_crc_and_header() {
        let bytes = batch(&[b"a", b"bb", b"ccc"]);
        let stored = u32::from_be_bytes(bytes[CRC_AT..CRC_AT + 4].try_into().unwrap());
        assert_eq!(stored, crc32c::crc32c(&bytes[CRC_COVERED_FROM..]));
        assert_eq!(be_i32(&bytes, BATCH_LENGTH_AT) as usize, bytes.len() - 12);
        assert_eq!(be_i32(&bytes, LAST_OFFSET_DELTA_AT), 2);
        assert_eq!(be_i32(&bytes, RECORD_COUNT_AT), 3);
        assert_eq!(be_i64(&bytes, MAX_TIMESTAMP_AT), 1_700_000_000_002);
        assert_eq!(be_i64(&bytes, PRODUCER_ID_AT), -1);
    }

    #[test]
    fn producer_fields_are_stamped() {
        let producer = Producer {
            id: 7,
            epoch: 2,
            base_sequence: 40,
        };
        let bytes = build_idempotent_batch(3, b"v", 5, producer);
        assert_eq!(be_i64(&bytes, PRODUCER_ID_AT), 7);
        assert_eq!(be_i16(&bytes, PRODUCER_EPOCH_AT), 2);
        assert_eq!(be_i32(&bytes, BASE_SEQUENCE_AT), 40);
        let stored = u32::from_be_bytes(bytes[CRC_AT..CRC_AT + 4].try_into().unwrap());
        assert_eq!(stored, crc32c::crc32c(&bytes[CRC_COVERED_FROM..]));
    }

    #[test]
    fn walker_reads_back_every_value_key_or_not_and_the_next_offset() {
        let mut builder = BatchBuilder::new(64, 0);
        builder.push(0, Some(b"key"), b"first");
        builder.push(1, None, b"second");
        let mut bytes = BytesMut::from(&builder.finish()[..]);
        bytes[0..8].copy_from_slice(&7i64.to_be_bytes());
        let mut summaries = Vec::new();
        let mut values = Vec::new();
        walk_batches(
            &bytes,
            true,
            |s| {
                summaries.push(*s);
                true
            },
            |v| values.push(v.to_vec()),
        )
        .unwrap();
        assert_eq!(values, vec![b"first".to_vec(), b"second".to_vec()]);
        assert_eq!(
            summaries,
            vec![BatchSummary {
                base_offset: 7,
                next_offset: 9,
                records: 2,
                bytes: bytes.len(),
                producer_id: -1,
                marker: None,
                control: false,
            }]
        );
        let marker = control_batch(5, 0, false, 3, 0);
        walk_batches(
            &marker,
            true,
            |s| {
                assert_eq!((s.control, s.marker, s.producer_id), (true, Some(false), 5));
                true
            },
            |_| panic!("a marker has no value to read"),
        )
        .unwrap();
    }

    #[test]
    fn partial_trailing_batch_is_skipped_and_garbage_is_an_error() {
        let whole = batch(&[b"x"]);
        let mut two = BytesMut::from(&whole[..]);
        two.extend_from_slice(&whole[..whole.len() - 3]);
        let mut count = 0;
        walk_batches(
            &two,
            true,
            |_| {
                count += 1;
                true
            },
            |_| {},
        )
        .unwrap();
        assert_eq!(count, 1);
        let mut bad = BytesMut::from(&whole[..]);
        bad[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(
            walk_batches(&bad, true, |_| true, |_| {}),
            Err(WalkError::Malformed(0))
        );
        bad[8..12].copy_from_slice(&((whole.len() - 12) as i32).to_be_bytes());
        bad[16] = 1;
        assert_eq!(
            walk_batches(&bad, true, |_| true, |_| {}),
            Err(WalkError::Magic(1))
        );
    }
}
