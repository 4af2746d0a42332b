//! Reading the records inside one stored batch, for the few answers that need a record
//! rather than a batch: the exact offset of a timestamp (ListOffsets), the keys
//! compaction keeps and a compacted topic requires. The fetch path never does this —
//! batches are stored and served as sent.
//!
//! Compressed batches are decompressed with pure-Rust decoders for the codecs Kafka
//! defines (attributes bits 0–2): gzip, snappy (raw, or in the xerial framing Kafka's
//! Java client writes), lz4 (frame format) and zstd. What a batch may decompress to is
//! bounded ([`DECOMPRESSED_BYTES_MAX`]): a stored batch is a client's bytes, and a
//! compression bomb must cost an error, not the shard's memory.

use std::{borrow::Cow, io::Read};

use weir_client::{
    record_batch::{ATTRIBUTE_LOG_APPEND_TIME, HEADER_BYTES},
    varint,
};

use super::record_batch::RecordBatch;

/// The most bytes a batch's records may decompress to here.
pub const DECOMPRESSED_BYTES_MAX: u64 = 64 << 20;

/// Why a batch's records could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordsError {
    /// The compression codec is not one Kafka defines.
    #[error("unknown compression codec {0}")]
    Codec(i16),
    /// The records did not decompress.
    #[error("{codec} records do not decompress: {reason}")]
    Decompress {
        /// The codec.
        codec: &'static str,
        /// The decoder's reason.
        reason: String,
    },
    /// The records did not compress again (compaction).
    #[error("{codec} records do not compress: {reason}")]
    Compress {
        /// The codec.
        codec: &'static str,
        /// The encoder's reason.
        reason: String,
    },
    /// The records decompress to more than [`DECOMPRESSED_BYTES_MAX`].
    #[error("records decompress to more than {DECOMPRESSED_BYTES_MAX} bytes")]
    TooLarge,
    /// A record's fields run past its bytes.
    #[error("malformed record {0}")]
    Malformed(u32),
}

/// One record's place and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordTime {
    /// Offset of the record relative to the batch's base offset.
    pub offset_delta: u32,
    /// Its timestamp: base timestamp + delta, or the batch's max timestamp for a
    /// LogAppendTime batch.
    pub timestamp: i64,
}

/// Every record's offset delta and timestamp, in order.
pub fn record_times(batch: &RecordBatch<'_>) -> Result<Vec<RecordTime>, RecordsError> {
    let append_time = batch.attributes() & ATTRIBUTE_LOG_APPEND_TIME != 0;
    each_record(batch, |i, mut record| {
        let bad = || RecordsError::Malformed(i);
        let timestamp_delta = varint::get(&mut record).ok_or_else(bad)?;
        let offset_delta = varint::get(&mut record).ok_or_else(bad)?;
        Ok(RecordTime {
            offset_delta: u32::try_from(offset_delta).map_err(|_| bad())?,
            timestamp: if append_time {
                batch.max_timestamp()
            } else {
                batch.base_timestamp().saturating_add(timestamp_delta)
            },
        })
    })
}

/// Every record's value, in order (`None` for a null value).
pub fn record_values(batch: &RecordBatch<'_>) -> Result<Vec<Option<Vec<u8>>>, RecordsError> {
    each_record(batch, |i, mut record| {
        let bad = || RecordsError::Malformed(i);
        varint::get(&mut record).ok_or_else(bad)?; // timestamp delta
        varint::get(&mut record).ok_or_else(bad)?; // offset delta
        let key_length = varint::get(&mut record).ok_or_else(bad)?;
        if key_length > 0 {
            record = record.get(key_length as usize..).ok_or_else(bad)?;
        }
        let value_length = varint::get(&mut record).ok_or_else(bad)?;
        if value_length < 0 {
            return Ok(None);
        }
        let value = record.get(..value_length as usize).ok_or_else(bad)?;
        Ok(Some(value.to_vec()))
    })
}

/// Where one record lies in a batch's (decompressed) records section, and what
/// compaction needs to know of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSpan {
    /// The record's whole bytes, length prefix included.
    pub bytes: std::ops::Range<usize>,
    /// Its key's bytes; `None` for a null key.
    pub key: Option<std::ops::Range<usize>>,
    /// True for a null value: a tombstone.
    pub tombstone: bool,
    /// Offset relative to the batch's base offset.
    pub offset_delta: u32,
    /// Its timestamp (as [`RecordTime::timestamp`]).
    pub timestamp: i64,
}

/// A batch's records section, decompressed, with every record's span in it.
#[derive(Debug)]
pub struct Records<'a> {
    /// The records section, decompressed when the batch is compressed.
    pub body: Cow<'a, [u8]>,
    /// Every record, in order.
    pub spans: Vec<RecordSpan>,
}

impl Records<'_> {
    /// The key of `span`, if it has one.
    pub fn key(&self, span: &RecordSpan) -> Option<&[u8]> {
        span.key.clone().map(|k| &self.body[k])
    }
}

/// Every record of the batch with its key, value kind, offset and time (for
/// compaction and for checking that a compacted topic's records have keys).
pub fn records<'a>(batch: &RecordBatch<'a>) -> Result<Records<'a>, RecordsError> {
    let body = decompressed(batch)?;
    let append_time = batch.attributes() & ATTRIBUTE_LOG_APPEND_TIME != 0;
    let mut spans = Vec::with_capacity(batch.record_count() as usize);
    let mut at = 0usize;
    for i in 0..batch.record_count() {
        let bad = || RecordsError::Malformed(i);
        let mut rest = body.get(at..).ok_or_else(bad)?;
        let before = rest.len();
        let length = usize::try_from(varint::get(&mut rest).ok_or_else(bad)?).map_err(|_| bad())?;
        let start = at + (before - rest.len());
        let end = start
            .checked_add(length)
            .filter(|e| *e <= body.len())
            .ok_or_else(bad)?;
        let mut record = body.get(start + 1..end).ok_or_else(bad)?; // after attributes
        let timestamp_delta = varint::get(&mut record).ok_or_else(bad)?;
        let offset_delta = varint::get(&mut record).ok_or_else(bad)?;
        let key_length = varint::get(&mut record).ok_or_else(bad)?;
        let key = if key_length < 0 {
            None
        } else {
            let from = end - record.len();
            let key_end = from + usize::try_from(key_length).map_err(|_| bad())?;
            record = body.get(key_end..end).ok_or_else(bad)?;
            Some(from..key_end)
        };
        let value_length = varint::get(&mut record).ok_or_else(bad)?;
        spans.push(RecordSpan {
            bytes: at..end,
            key,
            tombstone: value_length < 0,
            offset_delta: u32::try_from(offset_delta).map_err(|_| bad())?,
            timestamp: if append_time {
                batch.max_timestamp()
            } else {
                batch.base_timestamp().saturating_add(timestamp_delta)
            },
        });
        at = end;
    }
    Ok(Records { body, spans })
}

/// What `read` makes of each record of the batch, in order; `read` gets the record's
/// index and its bytes after the length and attributes (timestamp delta first).
fn each_record<T>(
    batch: &RecordBatch<'_>,
    mut read: impl FnMut(u32, &[u8]) -> Result<T, RecordsError>,
) -> Result<Vec<T>, RecordsError> {
    let records = decompressed(batch)?;
    let mut rest = &records[..];
    let mut out = Vec::with_capacity(batch.record_count() as usize);
    for i in 0..batch.record_count() {
        let bad = || RecordsError::Malformed(i);
        let length = usize::try_from(varint::get(&mut rest).ok_or_else(bad)?).map_err(|_| bad())?;
        let record = rest.get(..length).ok_or_else(bad)?;
        rest = &rest[length..];
        out.push(read(i, record.get(1..).ok_or_else(bad)?)?);
    }
    Ok(out)
}

/// The batch's records section, decompressed; uncompressed records are not copied.
fn decompressed<'a>(batch: &RecordBatch<'a>) -> Result<Cow<'a, [u8]>, RecordsError> {
    let body = &batch.as_bytes()[HEADER_BYTES..];
    let codec = batch.attributes() & 0x07;
    let fail = |codec: &'static str| {
        move |e: std::io::Error| RecordsError::Decompress {
            codec,
            reason: e.to_string(),
        }
    };
    let owned = match codec {
        0 => return Ok(Cow::Borrowed(body)),
        1 => bounded(flate2::read::GzDecoder::new(body), fail("gzip")),
        2 => snappy(body),
        3 => bounded(lz4_flex::frame::FrameDecoder::new(body), fail("lz4")),
        4 => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(body).map_err(|e| {
                RecordsError::Decompress {
                    codec: "zstd",
                    reason: e.to_string(),
                }
            })?;
            bounded(decoder, fail("zstd"))
        }
        other => Err(RecordsError::Codec(other)),
    };
    owned.map(Cow::Owned)
}

/// Reads `reader` to its end, refusing more than [`DECOMPRESSED_BYTES_MAX`].
fn bounded(
    reader: impl Read,
    fail: impl Fn(std::io::Error) -> RecordsError,
) -> Result<Vec<u8>, RecordsError> {
    let mut out = Vec::new();
    reader
        .take(DECOMPRESSED_BYTES_MAX + 1)
        .read_to_end(&mut out)
        .map_err(fail)?;
    if out.len() as u64 > DECOMPRESSED_BYTES_MAX {
        return Err(RecordsError::TooLarge);
    }
    Ok(out)
}

/// The xerial framing Kafka's Java client puts around snappy: a magic header, then
/// blocks of a 4-byte big-endian length and a raw snappy block.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

fn snappy(body: &[u8]) -> Result<Vec<u8>, RecordsError> {
    let fail = |reason: String| RecordsError::Decompress {
        codec: "snappy",
        reason,
    };
    let block = |raw: &[u8], out: &mut Vec<u8>| -> Result<(), RecordsError> {
        let len = snap::raw::decompress_len(raw).map_err(|e| fail(e.to_string()))?;
        if (out.len() + len) as u64 > DECOMPRESSED_BYTES_MAX {
            return Err(RecordsError::TooLarge);
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new()
            .decompress(raw, &mut out[start..])
            .map_err(|e| fail(e.to_string()))?;
        Ok(())
    };
    let mut out = Vec::new();
    if !body.starts_with(XERIAL_MAGIC) {
        block(body, &mut out)?;
        return Ok(out);
    }
    let mut rest = body
        .get(XERIAL_HEADER_BYTES..)
        .ok_or_else(|| fail("truncated xerial header".into()))?;
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| fail("truncated xerial block length".into()))?;
        let len = u32::from_be_bytes(*len) as usize;
        let raw = tail
            .get(..len)
            .ok_or_else(|| fail("truncated xerial block".into()))?;
        block(raw, &mut out)?;
        rest = &tail[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use weir_client::record_batch::{seal_crc, BatchBuilder, ATTRIBUTES_AT};

    use super::*;

    /// A batch of records at `times` (ms), compressed with `codec` by `compress`.
    fn batch(times: &[i64], codec: i16, compress: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
        let mut b = BatchBuilder::new(1024, times[0]);
        for t in times {
            b.push(*t, Some(b"key"), b"value");
        }
        let plain = b.finish().to_vec();
        let mut out = plain[..HEADER_BYTES].to_vec();
        out.extend(compress(&plain[HEADER_BYTES..]));
        let length = (out.len() - 12) as i32;
        out[8..12].copy_from_slice(&length.to_be_bytes());
        out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&codec.to_be_bytes());
        seal_crc(&mut out);
        out
    }

    fn times(bytes: &[u8]) -> Vec<i64> {
        let (b, _) = RecordBatch::validate(bytes, 1 << 20).expect("valid");
        record_times(&b)
            .expect("readable")
            .iter()
            .map(|r| r.timestamp)
            .collect()
    }

    #[test]
    fn every_codec_gives_back_each_records_timestamp() {
        let at = [1_000, 2_000, 2_500, 7_000];
        let gzip = |b: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(b).unwrap();
            e.finish().unwrap()
        };
        let snappy_raw = |b: &[u8]| snap::raw::Encoder::new().compress_vec(b).unwrap();
        let snappy_xerial = |b: &[u8]| {
            let block = snap::raw::Encoder::new().compress_vec(b).unwrap();
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
            out.extend_from_slice(&(block.len() as u32).to_be_bytes());
            out.extend(block);
            out
        };
        let lz4 = |b: &[u8]| {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(b).unwrap();
            e.finish().unwrap()
        };
        let zstd = |b: &[u8]| {
            ruzstd::encoding::compress_to_vec(b, ruzstd::encoding::CompressionLevel::Fastest)
        };
        assert_eq!(times(&batch(&at, 0, |b| b.to_vec())), at);
        assert_eq!(times(&batch(&at, 1, gzip)), at);
        assert_eq!(times(&batch(&at, 2, snappy_raw)), at);
        assert_eq!(times(&batch(&at, 2, snappy_xerial)), at);
        assert_eq!(times(&batch(&at, 3, lz4)), at);
        assert_eq!(times(&batch(&at, 4, zstd)), at);
    }

    #[test]
    fn garbage_and_bombs_are_errors_not_panics() {
        let bad = batch(&[1, 2], 1, |_| b"not gzip at all".to_vec());
        let (b, _) = RecordBatch::validate(&bad, 1 << 20).expect("valid header and crc");
        assert!(matches!(
            record_times(&b),
            Err(RecordsError::Decompress { codec: "gzip", .. })
        ));
        let bomb = batch(&[1], 1, |_| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(&vec![0u8; (DECOMPRESSED_BYTES_MAX + 1) as usize])
                .unwrap();
            e.finish().unwrap()
        });
        let (b, _) = RecordBatch::validate(&bomb, 1 << 30).expect("valid");
        assert_eq!(record_times(&b), Err(RecordsError::TooLarge));
    }
}
