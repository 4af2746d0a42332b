//! The pace and I/O window of a compaction pass, shared by its reading (the segments it
//! cleans) and its writing (the `.cleaned` files).

use std::time::Duration;

/// Bytes read from a segment at a time.
pub(super) const READ_WINDOW_BYTES: usize = 1 << 20;

/// Holds a pass to a byte rate (read plus written), so compaction leaves the device to
/// produce: Kafka's `log.cleaner.io.max.bytes.per.second`.
pub struct Pace {
    bytes_per_second: u64,
    since: std::time::Instant,
    bytes: u64,
}

impl Pace {
    /// A pace of `bytes_per_second`; 0 means unpaced.
    pub fn new(bytes_per_second: u64) -> Pace {
        Pace {
            bytes_per_second,
            since: std::time::Instant::now(),
            bytes: 0,
        }
    }

    /// Accounts for `bytes` of I/O, sleeping as long as the pass is ahead of its rate.
    pub async fn spend(&mut self, bytes: u64) {
        self.bytes += bytes;
        if self.bytes_per_second == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.bytes as f64 / self.bytes_per_second as f64);
        if let Some(ahead) = due.checked_sub(self.since.elapsed()) {
            glommio::timer::sleep(ahead).await;
        }
    }
}
