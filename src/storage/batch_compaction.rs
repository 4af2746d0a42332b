//! The batches a compacted segment is made of, built from stored batches: a batch with
//! some of its records removed, an empty batch that keeps an idempotent producer's
//! place, and a filler that stands for a run of batches whose records were all removed.
//!
//! Every batch built here keeps the offset range of what it replaces (`baseOffset` and
//! `lastOffsetDelta`, as Kafka's cleaner does), so a compacted segment's batches still
//! follow each other densely: recovery's continuity rule, the offset index and every
//! reader work on it unchanged. Kept records are copied byte for byte (their offset and
//! timestamp deltas are relative to header fields that do not change) and compressed
//! again with the batch's codec.

use std::io::Write;

use weir_client::record_batch::{
    seal_crc, ATTRIBUTES_AT, ATTRIBUTE_COMPRESSION_MASK, BASE_SEQUENCE_AT, BASE_TIMESTAMP_AT,
    BATCH_LENGTH_AT, HEADER_BYTES, LAST_OFFSET_DELTA_AT, LEADER_EPOCH_AT, LOG_OVERHEAD_BYTES,
    MAGIC_AT, MAGIC_V2, MAX_TIMESTAMP_AT, PRODUCER_EPOCH_AT, PRODUCER_ID_AT, RECORD_COUNT_AT,
};

use super::{
    batch_records::{RecordSpan, Records, RecordsError},
    record_batch::RecordBatch,
};

/// `batch` with only the records `spans` (a subsequence of `records.spans`, in order),
/// compressed again with its codec; an empty batch (no records, uncompressed, producer
/// fields kept) when `spans` is empty.
pub fn with_records(
    batch: &RecordBatch<'_>,
    records: &Records<'_>,
    spans: &[&RecordSpan],
) -> Result<Vec<u8>, RecordsError> {
    let mut plain = Vec::with_capacity(spans.iter().map(|s| s.bytes.len()).sum());
    for span in spans {
        plain.extend_from_slice(&records.body[span.bytes.clone()]);
    }
    let mut attributes = batch.attributes();
    let codec = attributes & ATTRIBUTE_COMPRESSION_MASK;
    let body = if spans.is_empty() {
        attributes &= !ATTRIBUTE_COMPRESSION_MASK;
        Vec::new()
    } else {
        compress(codec, &plain)?
    };
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
    out.extend_from_slice(&batch.as_bytes()[..HEADER_BYTES]);
    out.extend_from_slice(&body);
    out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    out[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&(spans.len() as i32).to_be_bytes());
    finish(out)
}

/// An empty batch standing for offsets `base..=last` whose records were all removed:
/// no producer, `timestamp` as both its first and its largest timestamp.
pub fn filler(base: u64, last: u64, timestamp: i64, leader_epoch: i32) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_BYTES];
    out[..8].copy_from_slice(&(base as i64).to_be_bytes());
    out[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&leader_epoch.to_be_bytes());
    out[MAGIC_AT] = MAGIC_V2 as u8;
    let delta = i32::try_from(last - base).unwrap_or(i32::MAX);
    out[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&delta.to_be_bytes());
    out[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8].copy_from_slice(&timestamp.to_be_bytes());
    out[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&timestamp.to_be_bytes());
    out[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&(-1i64).to_be_bytes());
    out[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2].copy_from_slice(&(-1i16).to_be_bytes());
    out[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&(-1i32).to_be_bytes());
    finish(out).unwrap_or_default()
}

/// The most offsets one filler may stand for (its `lastOffsetDelta` is an i32).
pub const FILLER_OFFSETS_MAX: u64 = i32::MAX as u64 + 1;

fn finish(mut out: Vec<u8>) -> Result<Vec<u8>, RecordsError> {
    let length =
        i32::try_from(out.len() - LOG_OVERHEAD_BYTES).map_err(|_| RecordsError::TooLarge)?;
    out[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    seal_crc(&mut out);
    Ok(out)
}

/// `plain` compressed with Kafka codec `codec` (attributes bits 0–2).
fn compress(codec: i16, plain: &[u8]) -> Result<Vec<u8>, RecordsError> {
    let fail = |codec: &'static str| {
        move |e: std::io::Error| RecordsError::Compress {
            codec,
            reason: e.to_string(),
        }
    };
    match codec {
        0 => Ok(plain.to_vec()),
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(plain).map_err(fail("gzip"))?;
            e.finish().map_err(fail("gzip"))
        }
        // Raw snappy: what librdkafka writes, and what the Java client's xerial stream
        // reads when the framing header is absent.
        2 => snap::raw::Encoder::new()
            .compress_vec(plain)
            .map_err(|e| fail("snappy")(std::io::Error::other(e))),
        3 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(plain).map_err(fail("lz4"))?;
            e.finish()
                .map_err(|e| fail("lz4")(std::io::Error::other(e)))
        }
        4 => Ok(ruzstd::encoding::compress_to_vec(
            plain,
            ruzstd::encoding::CompressionLevel::Fastest,
        )),
        other => Err(RecordsError::Codec(other)),
    }
}

#[cfg(test)]
mod tests {
    use weir_client::record_batch::{BatchBuilder, Producer};

    use super::*;
    use crate::storage::{batch_records::records, record_batch};

    /// A batch of `keys` (value = key + "-v", `None` key → keyless, "dead" → tombstone),
    /// compressed with `codec`, at base offset 100.
    fn batch(keys: &[Option<&str>], codec: i16) -> Vec<u8> {
        let mut b = BatchBuilder::new(4096, 1_000).producer(Producer {
            id: 7,
            epoch: 2,
            base_sequence: 40,
        });
        for (i, k) in keys.iter().enumerate() {
            let at = 1_000 + i as i64;
            match k {
                Some("dead") => b.push_tombstone(at, b"dead"),
                Some(k) => b.push(at, Some(k.as_bytes()), format!("{k}-v").as_bytes()),
                None => b.push(at, None, b"keyless"),
            }
        }
        let plain = b.finish().to_vec();
        let body = compress(codec, &plain[HEADER_BYTES..]).expect("compress");
        let mut out = plain[..HEADER_BYTES].to_vec();
        out.extend(body);
        out[..8].copy_from_slice(&100i64.to_be_bytes());
        out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&codec.to_be_bytes());
        finish(out).expect("finish")
    }

    fn keys_of(bytes: &[u8]) -> Vec<(u32, Option<Vec<u8>>, bool)> {
        let size = record_batch::check_stored(bytes, 1 << 20).expect("valid stored batch");
        let (b, _) = RecordBatch::validate_stored(&bytes[..size], 1 << 20).expect("valid");
        let r = records(&b).expect("readable");
        r.spans
            .iter()
            .map(|s| (s.offset_delta, r.key(s).map(<[u8]>::to_vec), s.tombstone))
            .collect()
    }

    #[test]
    fn kept_records_keep_their_offsets_and_codec() {
        for codec in 0..=4 {
            let original = batch(
                &[Some("a"), Some("b"), Some("dead"), None, Some("c")],
                codec,
            );
            let (b, _) = RecordBatch::validate(&original, 1 << 20).expect("valid");
            let r = records(&b).expect("readable");
            let keep: Vec<&RecordSpan> =
                r.spans.iter().filter(|s| s.offset_delta % 2 == 0).collect();
            let rebuilt = with_records(&b, &r, &keep).expect("rebuilt");
            let (nb, _) = RecordBatch::validate_stored(&rebuilt, 1 << 20).expect("stored-valid");
            assert_eq!(nb.base_offset(), 100);
            assert_eq!(nb.last_offset_delta(), 4, "offset range kept");
            assert_eq!(nb.record_count(), 3);
            assert_eq!(nb.attributes() & ATTRIBUTE_COMPRESSION_MASK, codec);
            assert_eq!((nb.producer_id(), nb.base_sequence()), (7, 40));
            assert_eq!(
                keys_of(&rebuilt),
                vec![
                    (0, Some(b"a".to_vec()), false),
                    (2, Some(b"dead".to_vec()), true),
                    (4, Some(b"c".to_vec()), false)
                ],
                "codec {codec}"
            );
            assert!(
                record_batch::check(&rebuilt, 1 << 20).is_err(),
                "not a produced batch"
            );
        }
    }

    #[test]
    fn an_emptied_batch_keeps_its_producer_and_range_uncompressed() {
        let original = batch(&[Some("a"), Some("b")], 4);
        let (b, _) = RecordBatch::validate(&original, 1 << 20).expect("valid");
        let r = records(&b).expect("readable");
        let empty = with_records(&b, &r, &[]).expect("rebuilt");
        assert_eq!(empty.len(), HEADER_BYTES);
        let (nb, _) = RecordBatch::validate_stored(&empty, 1 << 20).expect("valid");
        assert_eq!((nb.record_count(), nb.last_offset_delta()), (0, 1));
        assert_eq!(nb.attributes() & ATTRIBUTE_COMPRESSION_MASK, 0);
        assert_eq!((nb.producer_id(), nb.producer_epoch()), (7, 2));
    }

    #[test]
    fn a_filler_spans_its_offsets_with_no_producer() {
        let f = filler(500, 10_499, 77, 3);
        let (b, _) = RecordBatch::validate_stored(&f, 1 << 20).expect("valid");
        assert_eq!(
            (b.base_offset(), b.offset_count(), b.record_count()),
            (500, 10_000, 0)
        );
        assert_eq!((b.producer_id(), b.partition_leader_epoch()), (-1, 3));
        assert_eq!((b.base_timestamp(), b.max_timestamp()), (77, 77));
    }
}
