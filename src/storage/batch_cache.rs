//! The shard's cache of recently written log bytes.
//!
//! O_DIRECT bypasses the page cache, so without this every consumer reading the tail
//! would go to the disk. The cache holds the very chunks the appender wrote (shared
//! `Rc` buffers, no extra copy), keyed by segment, and evicts the oldest chunks of the
//! whole shard first once `bytes_max` is exceeded: a log's tail is what consumers read,
//! so first-in first-out is the right policy.
//!
//! Within a segment, cached chunks are contiguous and ordered by position: each chunk
//! starts at or before the previous one's end (a rewritten tail page is cached twice,
//! with identical bytes). Eviction removes a segment's oldest chunk first, so a segment
//! is cached from some position up to its flushed end.

use std::{
    cell::RefCell,
    collections::{HashMap, VecDeque},
};

use bytes::{Bytes, BytesMut};

use super::{segment_appender::Chunk, FilePosition};
use crate::metrics::StorageMetrics;

/// Identifies one segment of one open log in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentKey {
    /// Unique per opened partition log on this shard.
    pub log_id: u64,
    /// The segment's base offset.
    pub base_offset: u64,
}

#[derive(Default)]
struct CacheState {
    segments: HashMap<SegmentKey, VecDeque<(u64, Chunk)>>,
    order: VecDeque<(SegmentKey, u64)>,
    bytes: usize,
    next_seq: u64,
}

/// Shard-local, bounded cache of written chunks. `!Send`: one per shard.
pub struct BatchCache {
    bytes_max: usize,
    state: RefCell<CacheState>,
    metrics: StorageMetrics,
}

impl BatchCache {
    /// A cache holding at most `bytes_max` bytes of chunk memory.
    pub fn new(bytes_max: usize) -> BatchCache {
        BatchCache::with_metrics(bytes_max, StorageMetrics::default())
    }

    /// [`BatchCache::new`], counting hits, misses and bytes held in `metrics`.
    pub fn with_metrics(bytes_max: usize, metrics: StorageMetrics) -> BatchCache {
        BatchCache {
            bytes_max,
            state: RefCell::new(CacheState::default()),
            metrics,
        }
    }

    /// Memory held by cached chunks now.
    pub fn bytes(&self) -> usize {
        self.state.borrow().bytes
    }

    /// Adds chunks of `key` that were just sealed, in file order, then evicts the
    /// shard's oldest chunks until the budget holds again.
    pub fn insert(&self, key: SegmentKey, chunks: &[Chunk]) {
        if self.bytes_max == 0 {
            return;
        }
        let mut s = self.state.borrow_mut();
        for chunk in chunks {
            let seq = s.next_seq;
            s.next_seq += 1;
            s.bytes += chunk.capacity;
            s.segments
                .entry(key)
                .or_default()
                .push_back((seq, chunk.clone()));
            s.order.push_back((key, seq));
        }
        while s.bytes > self.bytes_max {
            let Some((key, seq)) = s.order.pop_front() else {
                break;
            };
            let Some(list) = s.segments.get_mut(&key) else {
                continue;
            };
            if list.front().is_some_and(|(front, _)| *front == seq) {
                let (_, chunk) = list.pop_front().expect("front checked");
                if list.is_empty() {
                    s.segments.remove(&key);
                }
                s.bytes -= chunk.capacity;
            }
        }
        self.metrics.cache_bytes.set(s.bytes as i64);
    }

    /// Forgets every chunk of `key` (segment deleted, log closed or fenced).
    pub fn remove_segment(&self, key: SegmentKey) {
        let mut s = self.state.borrow_mut();
        if let Some(list) = s.segments.remove(&key) {
            s.bytes -= list.iter().map(|(_, c)| c.capacity).sum::<usize>();
        }
        self.metrics.cache_bytes.set(s.bytes as i64);
    }

    /// Forgets every segment of one log.
    pub fn remove_log(&self, log_id: u64) {
        let s = self.state.borrow_mut();
        let keys: Vec<SegmentKey> = s
            .segments
            .keys()
            .filter(|k| k.log_id == log_id)
            .copied()
            .collect();
        drop(s);
        for key in keys {
            self.remove_segment(key);
        }
    }

    /// Copies `[position, position + len)` of the segment out of the cache, or returns
    /// `None` unless the cache holds the whole range.
    pub fn read(&self, key: SegmentKey, position: FilePosition, len: usize) -> Option<Bytes> {
        let read = self.read_cached(key, position, len);
        match read {
            Some(_) => self.metrics.cache_hits.inc(),
            None => self.metrics.cache_misses.inc(),
        };
        read
    }

    fn read_cached(&self, key: SegmentKey, position: FilePosition, len: usize) -> Option<Bytes> {
        let s = self.state.borrow();
        let list = s.segments.get(&key)?;
        let start = position.0;
        let end = start + len as u64;
        // Chunks are ordered by position: find the last one starting at or before start.
        let first = list.partition_point(|(_, c)| c.position.0 <= start);
        if first == 0 {
            return None;
        }
        let mut out = BytesMut::with_capacity(len);
        let mut at = start;
        for (_, chunk) in list.range(first - 1..) {
            if at >= end {
                break;
            }
            if chunk.position.0 > at {
                return None;
            }
            let chunk_end = chunk.end().0;
            if chunk_end <= at {
                continue;
            }
            let to = chunk_end.min(end);
            let from = (at - chunk.position.0) as usize;
            out.extend_from_slice(&chunk.content()[from..(to - chunk.position.0) as usize]);
            at = to;
        }
        (at >= end).then(|| out.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_support::run;
    use std::rc::Rc;

    fn chunk(position: u64, fill: u8, valid: usize, capacity: usize) -> Chunk {
        let mut data = glommio::allocate_dma_buffer(capacity);
        data.as_bytes_mut().fill(fill);
        Chunk {
            position: FilePosition(position),
            data: Rc::new(data),
            valid_bytes: valid,
            capacity,
        }
    }

    const KEY: SegmentKey = SegmentKey {
        log_id: 1,
        base_offset: 0,
    };

    #[test]
    fn reads_span_chunks_and_refuse_gaps() {
        run(async {
            let cache = BatchCache::new(1 << 20);
            cache.insert(KEY, &[chunk(0, 1, 6000, 8192), chunk(4096, 2, 5000, 8192)]);
            let got = cache.read(KEY, FilePosition(4000), 4000).expect("cached");
            assert_eq!(&got[..2000], &[1u8; 2000][..]);
            assert_eq!(&got[2000..], &[2u8; 2000][..], "the next chunk continues");
            assert!(
                cache.read(KEY, FilePosition(8000), 2000).is_none(),
                "past the end"
            );
            assert!(cache
                .read(
                    SegmentKey {
                        log_id: 2,
                        base_offset: 0
                    },
                    FilePosition(0),
                    1
                )
                .is_none());
        });
    }

    #[test]
    fn oldest_chunks_are_evicted_first_across_segments() {
        run(async {
            let cache = BatchCache::new(16384);
            let other = SegmentKey {
                log_id: 2,
                base_offset: 0,
            };
            cache.insert(KEY, &[chunk(0, 1, 8192, 8192)]);
            cache.insert(other, &[chunk(0, 2, 8192, 8192)]);
            cache.insert(KEY, &[chunk(8192, 3, 8192, 8192)]);
            assert_eq!(cache.bytes(), 16384);
            assert!(cache.read(KEY, FilePosition(0), 10).is_none(), "evicted");
            assert!(cache.read(KEY, FilePosition(8192), 10).is_some());
            assert!(cache.read(other, FilePosition(0), 10).is_some());
            cache.remove_log(2);
            assert_eq!(cache.bytes(), 8192);
        });
    }
}
