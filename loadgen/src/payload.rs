//! loadgen's message values: the first 8 bytes are the message's intended send time
//! (process clock, big-endian nanoseconds), the next 8 its sequence number
//! (stream << 40 | index), and the rest the filler pattern [`FILLER`]. Batches are
//! built and walked by `weir_client::record_batch`.

use bytes::{BufMut, BytesMut};
use weir_client::record_batch::BatchBuilder;

/// The smallest message loadgen can produce: send time and sequence number.
pub const PAYLOAD_BYTES_MIN: usize = 16;
/// The repeating pattern after the first 16 bytes of every value.
pub const FILLER: &[u8] = b"loadgen payload ";

/// Writes one message value of `size` bytes (at least [`PAYLOAD_BYTES_MIN`]) into `out`.
pub fn write_payload(out: &mut BytesMut, size: usize, send_ns: u64, sequence: u64, filler: &[u8]) {
    debug_assert!(size >= PAYLOAD_BYTES_MIN && filler.len() >= size - PAYLOAD_BYTES_MIN);
    out.put_u64(send_ns);
    out.put_u64(sequence);
    out.put_slice(&filler[..size - PAYLOAD_BYTES_MIN]);
}

/// Appends a record with `key` whose `value_bytes`-byte value is a loadgen payload.
pub fn push_payload(
    builder: &mut BatchBuilder,
    key: Option<&[u8]>,
    timestamp_ms: i64,
    value_bytes: usize,
    send_ns: u64,
    sequence: u64,
    filler: &[u8],
) {
    builder.push_with(timestamp_ms, key, value_bytes, |out| {
        write_payload(out, value_bytes, send_ns, sequence, filler)
    });
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

/// Reads the send time and sequence number from a loadgen value, if it is one.
pub fn read_payload(value: &[u8]) -> Option<(u64, u64)> {
    let send_ns = u64::from_be_bytes(value.get(0..8)?.try_into().ok()?);
    let sequence = u64::from_be_bytes(value.get(8..16)?.try_into().ok()?);
    Some((send_ns, sequence))
}

#[cfg(test)]
mod tests {
    use weir_client::record_batch::walk_batches;

    use super::*;

    #[test]
    fn payloads_read_back_through_a_batch() {
        let filler = filler(64);
        let mut builder = BatchBuilder::new(4096, 1_700_000_000_000);
        for (i, (send, seq)) in [(10, 20), (30, 40)].into_iter().enumerate() {
            push_payload(
                &mut builder,
                None,
                1_700_000_000_000 + i as i64,
                64,
                send,
                seq,
                &filler,
            );
        }
        let bytes = builder.finish();
        let mut values = Vec::new();
        walk_batches(
            &bytes,
            true,
            |_| true,
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
    }
}
