//! Kafka framing: every request and response is a big-endian `i32` length followed by
//! that many bytes. Check, then parse: the length is bounded before anything is
//! allocated, and a partial frame is simply not ready yet.

use bytes::{Buf, BytesMut};

/// Why a frame is refused; the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length prefix is negative.
    #[error("negative frame length {0}")]
    NegativeLength(i32),
    /// The length prefix exceeds `max_request_bytes`.
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// The declared length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// Room reserved ahead for the rest of a partial frame: memory grows with the bytes that
/// arrive, not with the length a client announces and may never send.
const RESERVE_AHEAD_BYTES_MAX: usize = 64 << 10;

/// Takes one whole frame's payload off the front of `buf`, or returns `Ok(None)` when
/// `buf` does not hold a whole frame yet (reserving room for up to
/// [`RESERVE_AHEAD_BYTES_MAX`] more of it).
pub fn take_frame(buf: &mut BytesMut, max_bytes: usize) -> Result<Option<BytesMut>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 0 {
        return Err(FrameError::NegativeLength(len));
    }
    let len = len as usize;
    if len > max_bytes {
        return Err(FrameError::TooLarge {
            len,
            max: max_bytes,
        });
    }
    if buf.len() < 4 + len {
        buf.reserve((4 + len - buf.len()).min(RESERVE_AHEAD_BYTES_MAX));
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_frames_wait_and_bad_lengths_are_refused() {
        let mut b = BytesMut::from(&[0, 0, 0, 3, 1, 2][..]);
        assert_eq!(take_frame(&mut b, 100), Ok(None));
        b.extend_from_slice(&[3, 0, 0]);
        assert_eq!(
            take_frame(&mut b, 100).expect("ok").as_deref(),
            Some(&[1u8, 2, 3][..])
        );
        assert_eq!(&b[..], &[0, 0]);
        let mut neg = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert_eq!(
            take_frame(&mut neg, 100),
            Err(FrameError::NegativeLength(-1))
        );
        let mut announced = BytesMut::from(&(100i32 << 20).to_be_bytes()[..]);
        assert_eq!(take_frame(&mut announced, 200 << 20), Ok(None));
        assert!(announced.capacity() <= 4 + RESERVE_AHEAD_BYTES_MAX);
        let mut big = BytesMut::from(&1000i32.to_be_bytes()[..]);
        assert_eq!(
            take_frame(&mut big, 100),
            Err(FrameError::TooLarge {
                len: 1000,
                max: 100
            })
        );
    }
}
