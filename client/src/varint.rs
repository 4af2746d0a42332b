//! Kafka's zig-zag varints, as record fields use them (the protobuf encoding of signed
//! integers).

use bytes::BufMut;

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// Bytes `value` takes as a varint: 1 to 10.
pub fn len(value: i64) -> usize {
    let mut z = zigzag(value);
    let mut len = 1;
    while z >= 0x80 {
        z >>= 7;
        len += 1;
    }
    len
}

/// Appends `value` as a varint.
pub fn put(out: &mut impl BufMut, value: i64) {
    let mut z = zigzag(value);
    while z >= 0x80 {
        out.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    out.put_u8(z as u8);
}

/// Reads a varint from the front of `buf` and advances past it; `None` when `buf` ends
/// first or the varint is longer than 10 bytes.
pub fn get(buf: &mut &[u8]) -> Option<i64> {
    let mut z = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        z |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((z >> 1) as i64 ^ -((z & 1) as i64));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let mut buf = Vec::new();
            put(&mut buf, value);
            assert_eq!(buf.len(), len(value));
            let mut slice = &buf[..];
            assert_eq!(get(&mut slice), Some(value));
            assert!(slice.is_empty());
        }
    }

    #[test]
    fn a_truncated_varint_is_none() {
        let mut slice: &[u8] = &[0x80, 0x80];
        assert_eq!(get(&mut slice), None);
    }
}
