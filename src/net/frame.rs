//! Kafka framing: every request and response is a big-endian `i32` length followed by
//! that many bytes. Check, then parse: the length is bounded before anything is
//! allocated, and a partial frame is simply not ready yet.
//!
//! [`FrameReader`] reads frames off a socket with as few copies as a frame's size
//! allows. Small requests arrive several to a read: reads land in a scratch buffer and
//! only the bytes received are copied behind the ones not framed yet (growing that
//! buffer for each read would zero all its spare room every time). A large frame — a
//! produce request of a few hundred KiB — is read straight into a buffer of its own
//! once its length is known: no copy out of scratch, no regrowth of a shared buffer,
//! and reads as large as the rest of the frame, so fewer of them. Its room is zeroed
//! just ahead of the bytes arriving, so the memory a connection holds still grows with
//! what its client sends, not with the length it announces.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use futures_lite::{AsyncRead, AsyncReadExt};

use super::deadline::within;

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

/// Why no frame could be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Reading the socket failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// The client sent a frame the broker refuses.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// No byte arrived within the read limit.
    #[error("idle for {0:?}")]
    Idle(Duration),
}

/// Room reserved ahead for the rest of a partial frame in the shared buffer: memory
/// grows with the bytes that arrive, not with the length a client announces.
const RESERVE_AHEAD_BYTES_MAX: usize = 64 << 10;

/// Bytes read per read call into scratch at first: an idle or quiet connection holds
/// little memory.
const READ_CHUNK_BYTES_MIN: usize = 4 << 10;

/// Bytes read per read call into scratch once a read has filled the smaller buffer (a
/// busy client).
const READ_CHUNK_BYTES_MAX: usize = 64 << 10;

/// A frame with at least this many bytes still to come is read into its own buffer.
const DIRECT_READ_BYTES_MIN: usize = 16 << 10;

/// The most a read straight into a frame asks for, and so the most room zeroed ahead
/// of the bytes that arrive.
const DIRECT_READ_BYTES_MAX: usize = 256 << 10;

/// A frame's own buffer is allocated for at most this many bytes up front (address
/// space only: the pages are touched as they are zeroed); a larger frame's buffer grows
/// as it fills.
const DIRECT_CAPACITY_BYTES_MAX: usize = 1 << 20;

/// The payload length `buf`'s frame announces, checked against `max_bytes`, or `None`
/// while its 4-byte prefix is incomplete.
fn frame_length(buf: &[u8], max_bytes: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = i32::from_be_bytes(*prefix);
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
    Ok(Some(len))
}

/// Takes one whole frame's payload off the front of `buf`, or returns `Ok(None)` when
/// `buf` does not hold a whole frame yet.
pub fn take_frame(buf: &mut BytesMut, max_bytes: usize) -> Result<Option<BytesMut>, FrameError> {
    Ok(frame_length(buf, max_bytes)?.and_then(|len| split_frame(buf, len)))
}

/// The payload of the frame of `len` bytes at the front of `buf`, taken off it, when
/// `buf` holds all of it.
fn split_frame(buf: &mut BytesMut, len: usize) -> Option<BytesMut> {
    (buf.len() >= 4 + len).then(|| {
        buf.advance(4);
        buf.split_to(len)
    })
}

/// Reads one connection's request frames; see the module docs.
#[derive(Debug)]
pub struct FrameReader {
    /// Bytes read and not framed yet: whole small frames, or the start of one.
    buf: BytesMut,
    /// Where small reads land before their bytes are appended to `buf`.
    scratch: Vec<u8>,
    /// The largest payload accepted.
    max_bytes: usize,
}

impl FrameReader {
    /// A reader refusing frames whose payload exceeds `max_bytes`.
    pub fn new(max_bytes: usize) -> FrameReader {
        FrameReader {
            buf: BytesMut::new(),
            scratch: vec![0; READ_CHUNK_BYTES_MIN],
            max_bytes,
        }
    }

    /// The next frame's payload, or `None` when the client closed the stream (also in
    /// the middle of a frame, whose bytes are dropped). Each read waits at most `limit`.
    pub async fn next<R: AsyncRead + Unpin>(
        &mut self,
        reader: &mut R,
        limit: Duration,
    ) -> Result<Option<BytesMut>, ReadError> {
        loop {
            if let Some(len) = frame_length(&self.buf, self.max_bytes)? {
                if let Some(frame) = split_frame(&mut self.buf, len) {
                    return Ok(Some(frame));
                }
                let missing = 4 + len - self.buf.len();
                if missing >= DIRECT_READ_BYTES_MIN {
                    return self.read_direct(reader, len, limit).await;
                }
                self.buf.reserve(missing.min(RESERVE_AHEAD_BYTES_MAX));
            }
            let n = read(reader, &mut self.scratch, limit).await?;
            if n == 0 {
                return Ok(None);
            }
            self.buf.extend_from_slice(&self.scratch[..n]);
            if n == self.scratch.len() && n < READ_CHUNK_BYTES_MAX {
                self.scratch.resize(READ_CHUNK_BYTES_MAX, 0);
            }
        }
    }

    /// Reads the rest of the frame of `len` bytes that `buf` holds the start of straight
    /// into a buffer of its own.
    async fn read_direct<R: AsyncRead + Unpin>(
        &mut self,
        reader: &mut R,
        len: usize,
        limit: Duration,
    ) -> Result<Option<BytesMut>, ReadError> {
        self.buf.advance(4);
        let mut frame = BytesMut::with_capacity(len.min(DIRECT_CAPACITY_BYTES_MAX));
        frame.extend_from_slice(&self.buf);
        self.buf.clear();
        let mut filled = frame.len();
        while filled < len {
            // Zero only the room this read may fill (never past the frame's end, so
            // the next frame's bytes stay in the socket for the shared buffer).
            let room_end = (filled + DIRECT_READ_BYTES_MAX).min(len);
            if frame.len() < room_end {
                frame.resize(room_end, 0);
            }
            let n = read(reader, &mut frame[filled..room_end], limit).await?;
            if n == 0 {
                return Ok(None);
            }
            filled += n;
        }
        Ok(Some(frame))
    }
}

/// One read into `into`, waiting at most `limit` for a byte.
async fn read<R: AsyncRead + Unpin>(
    reader: &mut R,
    into: &mut [u8],
    limit: Duration,
) -> Result<usize, ReadError> {
    Ok(within(limit, reader.read(into))
        .await
        .ok_or(ReadError::Idle(limit))??)
}

#[cfg(test)]
mod tests {
    use std::{
        pin::Pin,
        task::{Context, Poll},
    };

    use super::*;

    /// A stream handing out `bytes` at most `step` at a time, as a socket does.
    struct Trickle {
        bytes: Vec<u8>,
        at: usize,
        step: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            into: &mut [u8],
        ) -> Poll<std::io::Result<usize>> {
            let n = into.len().min(self.step).min(self.bytes.len() - self.at);
            into[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Poll::Ready(Ok(n))
        }
    }

    fn framed(payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            out.extend_from_slice(&(p.len() as i32).to_be_bytes());
            out.extend_from_slice(p);
        }
        out
    }

    fn read_all(bytes: Vec<u8>, step: usize, max: usize) -> Result<Vec<Vec<u8>>, ReadError> {
        glommio::LocalExecutor::default().run(async move {
            let mut stream = Trickle { bytes, at: 0, step };
            let mut frames = FrameReader::new(max);
            let mut out = Vec::new();
            while let Some(f) = frames.next(&mut stream, Duration::from_secs(5)).await? {
                out.push(f.to_vec());
            }
            Ok(out)
        })
    }

    #[test]
    fn small_and_large_frames_come_out_whole_however_the_bytes_arrive() {
        // Sizes around each threshold: the shared buffer, the direct read, its chunk,
        // and a frame larger than its up-front capacity.
        let sizes = [
            0,
            3,
            1000,
            DIRECT_READ_BYTES_MIN - 1,
            DIRECT_READ_BYTES_MIN + 5,
            7,
            DIRECT_READ_BYTES_MAX + 3,
            256 << 10,
            DIRECT_CAPACITY_BYTES_MAX + (300 << 10),
            2,
        ];
        let payloads: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j * 7) as u8).collect())
            .collect();
        for step in [1 << 20, 65_536, 4_099, 1_000] {
            let got = read_all(framed(&payloads), step, 4 << 20).expect("frames");
            assert_eq!(got, payloads, "read {step} bytes at a time");
        }
    }

    #[test]
    fn a_stream_ending_mid_frame_ends_cleanly_and_bad_lengths_are_refused() {
        let mut cut = framed(&[vec![1, 2, 3], vec![9; 100_000]]);
        cut.truncate(cut.len() - 10);
        let got = read_all(cut, 4_096, 1 << 20).expect("frames");
        assert_eq!(got, vec![vec![1, 2, 3]]);
        assert!(matches!(
            read_all((-1i32).to_be_bytes().to_vec(), 4, 100),
            Err(ReadError::Frame(FrameError::NegativeLength(-1)))
        ));
        assert!(matches!(
            read_all(1000i32.to_be_bytes().to_vec(), 4, 100),
            Err(ReadError::Frame(FrameError::TooLarge {
                len: 1000,
                max: 100
            }))
        ));
    }

    /// A client that connected and sends nothing.
    struct Silent;

    impl AsyncRead for Silent {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut [u8],
        ) -> Poll<std::io::Result<usize>> {
            Poll::Pending
        }
    }

    #[test]
    fn a_silent_client_is_idle_after_the_limit() {
        let got = glommio::LocalExecutor::default().run(async {
            FrameReader::new(100)
                .next(&mut Silent, Duration::from_millis(20))
                .await
        });
        assert!(matches!(got, Err(ReadError::Idle(limit)) if limit == Duration::from_millis(20)));
    }
}
