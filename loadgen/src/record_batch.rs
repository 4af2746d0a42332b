//! Kafka RecordBatch v2: the encoder the producers use and the walker the consumers use.
//!
//! Records carry loadgen's payload: the first 8 bytes are the message's intended send
//! time (process clock, big-endian nanoseconds), the next 8 its sequence number
//! (stream << 40 | index), and the rest the filler pattern [`FILLER`]. The encoder writes
//! every field Kafka defines (no compression, no producer id) and the CRC-32C over
//! attributes..end, so any broker that validates batches accepts them.

use bytes::{BufMut, Bytes, BytesMut};

/// Bytes before the first record.
pub const HEADER_BYTES: usize = 61;
/// The smallest message loadgen can produce: send time and sequence number.
pub const PAYLOAD_BYTES_MIN: usize = 16;
/// The repeating pattern after the first 16 bytes of every value.
pub const FILLER: &[u8] = b"loadgen payload ";

const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;
const RECORD_COUNT_OFFSET: usize = 57;

/// Writes one message value of `size` bytes (at least [`PAYLOAD_BYTES_MIN`]) into `out`.
pub fn write_payload(out: &mut BytesMut, size: usize, send_ns: u64, sequence: u64, filler: &[u8]) {
    debug_assert!(size >= PAYLOAD_BYTES_MIN && filler.len() >= size - PAYLOAD_BYTES_MIN);
    out.put_u64(send_ns);
    out.put_u64(sequence);
    out.put_slice(&filler[..size - PAYLOAD_BYTES_MIN]);
}

/// The filler of a `size`-byte value, built once per producer.
pub fn filler(size: usize) -> Vec<u8> {
    FILLER
        .iter()
        .copied()
        .cycle()
        .take(size.saturating_sub(PAYLOAD_BYTES_MIN))
        .collect()
}

/// Builds one batch of records in place; [`BatchBuilder::finish`] completes the header.
pub struct BatchBuilder {
    buf: BytesMut,
    records: i32,
    base_timestamp_ms: i64,
    max_timestamp_ms: i64,
}

impl BatchBuilder {
    /// An empty batch with room for `capacity_bytes` of records.
    pub fn new(capacity_bytes: usize, base_timestamp_ms: i64) -> BatchBuilder {
        let mut buf = BytesMut::with_capacity(HEADER_BYTES + capacity_bytes);
        buf.put_bytes(0, HEADER_BYTES);
        BatchBuilder {
            buf,
            records: 0,
            base_timestamp_ms,
            max_timestamp_ms: base_timestamp_ms,
        }
    }

    /// Encoded size so far, header included.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Appends a record with a null key and no headers whose value is a loadgen payload.
    pub fn push_payload(
        &mut self,
        timestamp_ms: i64,
        value_bytes: usize,
        send_ns: u64,
        sequence: u64,
        filler: &[u8],
    ) {
        let timestamp_delta = timestamp_ms - self.base_timestamp_ms;
        let offset_delta = i64::from(self.records);
        let value_len = value_bytes as i64;
        let body_bytes = 1
            + varint_len(timestamp_delta)
            + varint_len(offset_delta)
            + varint_len(-1)
            + varint_len(value_len)
            + value_bytes
            + varint_len(0);
        put_varint(&mut self.buf, body_bytes as i64);
        self.buf.put_u8(0);
        put_varint(&mut self.buf, timestamp_delta);
        put_varint(&mut self.buf, offset_delta);
        put_varint(&mut self.buf, -1);
        put_varint(&mut self.buf, value_len);
        write_payload(&mut self.buf, value_bytes, send_ns, sequence, filler);
        put_varint(&mut self.buf, 0);
        self.records += 1;
        self.max_timestamp_ms = self.max_timestamp_ms.max(timestamp_ms);
    }

    /// Completes the header (lengths, offsets, timestamps, CRC) and returns the batch.
    pub fn finish(mut self) -> Bytes {
        let batch_length = (self.buf.len() - 12) as i32;
        let header = &mut self.buf[..HEADER_BYTES];
        header[8..12].copy_from_slice(&batch_length.to_be_bytes());
        header[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        header[16] = 2;
        header[23..27].copy_from_slice(&(self.records - 1).to_be_bytes());
        header[27..35].copy_from_slice(&self.base_timestamp_ms.to_be_bytes());
        header[35..43].copy_from_slice(&self.max_timestamp_ms.to_be_bytes());
        header[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        header[51..53].copy_from_slice(&(-1i16).to_be_bytes());
        header[53..57].copy_from_slice(&(-1i32).to_be_bytes());
        header[RECORD_COUNT_OFFSET..HEADER_BYTES].copy_from_slice(&self.records.to_be_bytes());
        let crc = crc32c::crc32c(&self.buf[ATTRIBUTES_OFFSET..]);
        self.buf[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
        self.buf.freeze()
    }
}

/// What a fetched batch holds, as far as a consumer needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSummary {
    /// The offset after the batch's last record.
    pub next_offset: i64,
    /// Records in the batch.
    pub records: u32,
    /// The batch's bytes, header included.
    pub bytes: usize,
}

/// Why a fetched batch could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    /// The batch's magic byte is not 2.
    #[error("record batch magic {0} (only v2 is read)")]
    Magic(i8),
    /// A length or count points outside the batch.
    #[error("record batch at offset {0} is malformed")]
    Malformed(i64),
}

/// Walks the complete batches in a fetch response's records, calling `on_value` with each
/// record's value when `values` is true. A partial batch at the end (cut by the fetch's
/// byte limit, as Kafka allows) is skipped. Returns one summary per complete batch.
pub fn walk_batches(
    records: &[u8],
    values: bool,
    mut on_batch: impl FnMut(BatchSummary),
    mut on_value: impl FnMut(&[u8]),
) -> Result<(), BatchError> {
    let mut rest = records;
    while rest.len() >= HEADER_BYTES {
        let base_offset = i64::from_be_bytes(rest[0..8].try_into().unwrap_or_default());
        let length = i32::from_be_bytes(rest[8..12].try_into().unwrap_or_default());
        let total = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_add(12))
            .filter(|&t| t >= HEADER_BYTES)
            .ok_or(BatchError::Malformed(base_offset))?;
        if total > rest.len() {
            break;
        }
        let batch = &rest[..total];
        let magic = batch[16] as i8;
        if magic != 2 {
            return Err(BatchError::Magic(magic));
        }
        let attributes = i16::from_be_bytes([batch[21], batch[22]]);
        let last_offset_delta = i32::from_be_bytes(batch[23..27].try_into().unwrap_or_default());
        let count = i32::from_be_bytes(batch[57..61].try_into().unwrap_or_default());
        let records = u32::try_from(count).map_err(|_| BatchError::Malformed(base_offset))?;
        // Compressed and control batches are counted but their values are not read.
        let plain = attributes & 0x07 == 0 && attributes & 0x20 == 0;
        if values && plain {
            walk_records(&batch[HEADER_BYTES..], records, &mut on_value)
                .ok_or(BatchError::Malformed(base_offset))?;
        }
        on_batch(BatchSummary {
            next_offset: base_offset + i64::from(last_offset_delta) + 1,
            records,
            bytes: total,
        });
        rest = &rest[total..];
    }
    Ok(())
}

fn walk_records(mut body: &[u8], count: u32, on_value: &mut impl FnMut(&[u8])) -> Option<()> {
    for _ in 0..count {
        let length = usize::try_from(get_varint(&mut body)?).ok()?;
        let mut record = body.get(..length)?;
        body = &body[length..];
        record = record.get(1..)?;
        get_varint(&mut record)?;
        get_varint(&mut record)?;
        let key_length = get_varint(&mut record)?;
        if key_length > 0 {
            record = record.get(usize::try_from(key_length).ok()?..)?;
        }
        let value_length = get_varint(&mut record)?;
        if value_length >= 0 {
            on_value(record.get(..usize::try_from(value_length).ok()?)?);
        }
    }
    Some(())
}

/// Reads the send time and sequence number from a loadgen value, if it is one.
pub fn read_payload(value: &[u8]) -> Option<(u64, u64)> {
    let send_ns = u64::from_be_bytes(value.get(0..8)?.try_into().ok()?);
    let sequence = u64::from_be_bytes(value.get(8..16)?.try_into().ok()?);
    Some((send_ns, sequence))
}

fn varint_len(value: i64) -> usize {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    let mut len = 1;
    while zigzag >= 0x80 {
        zigzag >>= 7;
        len += 1;
    }
    len
}

fn put_varint(buf: &mut BytesMut, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        buf.put_u8((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    buf.put_u8(zigzag as u8);
}

fn get_varint(buf: &mut &[u8]) -> Option<i64> {
    let mut zigzag = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        zigzag |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((zigzag >> 1) as i64 ^ -((zigzag & 1) as i64));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(values: &[(u64, u64)], size: usize) -> Bytes {
        let filler = filler(size);
        let mut builder = BatchBuilder::new(4096, 1_700_000_000_000);
        for (i, &(send, seq)) in values.iter().enumerate() {
            builder.push_payload(1_700_000_000_000 + i as i64, size, send, seq, &filler);
        }
        builder.finish()
    }

    #[test]
    fn encoded_batch_has_a_valid_crc_and_header() {
        let bytes = batch(&[(1, 2), (3, 4), (5, 6)], 100);
        let stored = u32::from_be_bytes(bytes[17..21].try_into().unwrap());
        assert_eq!(stored, crc32c::crc32c(&bytes[21..]));
        assert_eq!(
            i32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize,
            bytes.len() - 12
        );
        assert_eq!(i32::from_be_bytes(bytes[23..27].try_into().unwrap()), 2);
        assert_eq!(i32::from_be_bytes(bytes[57..61].try_into().unwrap()), 3);
        assert_eq!(
            i64::from_be_bytes(bytes[35..43].try_into().unwrap()),
            1_700_000_000_002
        );
    }

    #[test]
    fn walker_reads_back_every_value_and_the_next_offset() {
        let mut bytes = BytesMut::from(&batch(&[(10, 20), (30, 40)], 64)[..]);
        bytes[0..8].copy_from_slice(&7i64.to_be_bytes());
        let mut summaries = Vec::new();
        let mut values = Vec::new();
        walk_batches(
            &bytes,
            true,
            |s| summaries.push(s),
            |v| {
                assert_eq!(v.len(), 64);
                assert!(v[16..]
                    .iter()
                    .zip(FILLER.iter().cycle())
                    .all(|(a, b)| a == b));
                values.push(read_payload(v).unwrap());
            },
        )
        .unwrap();
        assert_eq!(values, vec![(10, 20), (30, 40)]);
        assert_eq!(
            summaries,
            vec![BatchSummary {
                next_offset: 9,
                records: 2,
                bytes: bytes.len()
            }]
        );
    }

    #[test]
    fn partial_trailing_batch_is_skipped_and_garbage_is_an_error() {
        let whole = batch(&[(1, 1)], 32);
        let mut two = BytesMut::from(&whole[..]);
        two.extend_from_slice(&whole[..whole.len() - 3]);
        let mut count = 0;
        walk_batches(&two, true, |_| count += 1, |_| {}).unwrap();
        assert_eq!(count, 1);
        let mut bad = BytesMut::from(&whole[..]);
        bad[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(
            walk_batches(&bad, true, |_| {}, |_| {}),
            Err(BatchError::Malformed(0))
        );
        bad[8..12].copy_from_slice(&((whole.len() - 12) as i32).to_be_bytes());
        bad[16] = 1;
        assert_eq!(
            walk_batches(&bad, true, |_| {}, |_| {}),
            Err(BatchError::Magic(1))
        );
    }

    #[test]
    fn varints_round_trip_at_the_edges() {
        for value in [
            0i64,
            -1,
            1,
            63,
            -64,
            64,
            8191,
            -8193,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ] {
            let mut buf = BytesMut::new();
            put_varint(&mut buf, value);
            assert_eq!(buf.len(), varint_len(value));
            let mut slice = &buf[..];
            assert_eq!(get_varint(&mut slice), Some(value));
            assert!(slice.is_empty());
        }
    }
}
