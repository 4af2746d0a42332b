//! Idempotent producers: per partition, each producer id's epoch and the sequence
//! numbers of its last [`BATCHES_KEPT`] batches, so a retried batch that is already
//! stored is answered with its original offsets instead of being stored twice, a gap
//! in sequences is refused, and an older epoch is fenced. Kafka's rules
//! (`ProducerStateManager`), kept by the partition log under its append lock.

use std::collections::{HashMap, VecDeque};

use super::Offset;

/// Batches remembered per producer, as Kafka remembers (the client keeps at most five
/// requests in flight per partition).
pub const BATCHES_KEPT: usize = 5;

/// A stored batch of an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSequence {
    /// `baseSequence`.
    pub first: i32,
    /// The sequence of its last record.
    pub last: i32,
    /// Offset of its first record.
    pub base_offset: Offset,
    /// Offset of its last record.
    pub last_offset: Offset,
    /// Its `maxTimestamp`.
    pub max_timestamp: i64,
}

#[derive(Debug, Clone, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchSequence>,
    /// The time of the expiry pass before its last batch or marker (ms since the
    /// epoch); 0 when no pass had run yet.
    last_seen_ms: i64,
}

/// What to do with an idempotent producer's batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// New and in order: append it.
    Append,
    /// Already stored: answer with these offsets and store nothing.
    Duplicate {
        /// Original first offset.
        base_offset: Offset,
        /// Original last offset.
        last_offset: Offset,
    },
}

/// Why an idempotent producer's batch is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    /// The batch's epoch is older than the producer's current one (a zombie).
    #[error("producer {producer_id} epoch {epoch} is older than the current epoch {current}")]
    StaleEpoch {
        /// The producer.
        producer_id: i64,
        /// The batch's epoch.
        epoch: i16,
        /// The epoch the partition has seen.
        current: i16,
    },
    /// The batch does not continue the producer's sequence.
    #[error("producer {producer_id} sent sequence {got}, expected {expected}")]
    OutOfOrder {
        /// The producer.
        producer_id: i64,
        /// The sequence that would continue.
        expected: i32,
        /// The batch's base sequence.
        got: i32,
    },
    /// The batch lies wholly before the oldest batch the partition remembers for the
    /// producer's epoch: it was stored (an epoch's sequences are appended only in
    /// order), but its offsets are no longer known. Kafka's DUPLICATE_SEQUENCE_NUMBER,
    /// which clients take as success without an offset. A client re-sends such a batch
    /// when its first send went to a leader that was cut off while the batches after it
    /// were acknowledged by the next leader.
    #[error(
        "producer {producer_id} re-sent sequences {first}..={last}, stored before the \
         batches remembered (from {oldest})"
    )]
    StoredLongAgo {
        /// The producer.
        producer_id: i64,
        /// The batch's base sequence.
        first: i32,
        /// The batch's last sequence.
        last: i32,
        /// The first sequence of the oldest batch remembered.
        oldest: i32,
    },
    /// A payload of several batches contained one already stored.
    #[error("producer {producer_id} re-sent a stored batch inside a multi-batch payload")]
    DuplicateInPayload {
        /// The producer.
        producer_id: i64,
    },
}

/// Kafka's sequence arithmetic: sequences wrap from `i32::MAX` to 0.
pub fn sequence_after(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// True when sequence `a` comes before `b` in Kafka's wrapping sequence space (within
/// half of it, so a wrapped sequence still counts as after).
fn precedes(a: i32, b: i32) -> bool {
    let distance = (i64::from(b) - i64::from(a)).rem_euclid(1 << 31);
    distance > 0 && distance < 1 << 30
}

/// The idempotent producers of one partition.
#[derive(Debug, Clone, Default)]
pub struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
    /// When the last [`expire`](Self::expire) pass ran (ms since the epoch; 0 before
    /// the first): what a producer's batch is stamped with, so an append reads no clock.
    pass_ms: i64,
}

impl ProducerStates {
    /// Decides what to do with a batch from `producer_id` at `epoch` holding sequences
    /// `first..=last`.
    pub fn check(
        &self,
        producer_id: i64,
        epoch: i16,
        first: i32,
        last: i32,
    ) -> Result<SequenceCheck, SequenceError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            // Unknown here (new, or its batches aged out of what recovery rescans):
            // accept whatever sequence it is at, as Kafka does.
            return Ok(SequenceCheck::Append);
        };
        if epoch < entry.epoch {
            return Err(SequenceError::StaleEpoch {
                producer_id,
                epoch,
                current: entry.epoch,
            });
        }
        if epoch > entry.epoch {
            return if first == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(SequenceError::OutOfOrder {
                    producer_id,
                    expected: 0,
                    got: first,
                })
            };
        }
        if let Some(b) = entry
            .batches
            .iter()
            .find(|b| b.first == first && b.last == last)
        {
            return Ok(SequenceCheck::Duplicate {
                base_offset: b.base_offset,
                last_offset: b.last_offset,
            });
        }
        let expected = entry
            .batches
            .back()
            .map_or(first, |b| sequence_after(b.last, 1));
        if first == expected {
            return Ok(SequenceCheck::Append);
        }
        // Only a batch out of order pays for this test.
        match entry.batches.front() {
            Some(oldest)
                if (first == last || precedes(first, last)) && precedes(last, oldest.first) =>
            {
                Err(SequenceError::StoredLongAgo {
                    producer_id,
                    first,
                    last,
                    oldest: oldest.first,
                })
            }
            _ => Err(SequenceError::OutOfOrder {
                producer_id,
                expected,
                got: first,
            }),
        }
    }

    /// Records a stored batch (after [`check`](Self::check) said append, or while
    /// recovery replays the log).
    pub fn record(&mut self, producer_id: i64, epoch: i16, batch: BatchSequence) {
        let entry = self.producers.entry(producer_id).or_default();
        entry.last_seen_ms = self.pass_ms;
        if epoch != entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == BATCHES_KEPT {
            entry.batches.pop_front();
        }
        entry.batches.push_back(batch);
    }

    /// Moves `producer_id` to `epoch` when that is newer (a transaction marker written
    /// at a bumped epoch fences the producer's older selves here), forgetting the older
    /// epoch's sequences.
    pub fn fence(&mut self, producer_id: i64, epoch: i16) {
        let entry = self.producers.entry(producer_id).or_default();
        entry.last_seen_ms = self.pass_ms;
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
    }

    /// Forgets every producer that wrote nothing for longer than `expiration_ms`
    /// before `now_ms` (Kafka's `producer.id.expiration.ms`), except those `keep` names
    /// (a transaction open here); returns how many were forgotten. A forgotten producer
    /// is new again: its next batch is taken at any sequence, as Kafka takes it.
    ///
    /// Time is the broker's, read by these passes: a producer's batches are stamped with
    /// the time of the pass before them (Kafka uses the batches' own timestamps, which
    /// forgets at once a producer that writes old CreateTimes). One stamped before the
    /// first pass counts from that pass.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64, keep: impl Fn(i64) -> bool) -> usize {
        self.pass_ms = now_ms;
        let before = self.producers.len();
        self.producers.retain(|&id, e| {
            if e.last_seen_ms == 0 {
                e.last_seen_ms = now_ms;
            }
            now_ms - e.last_seen_ms <= expiration_ms || keep(id)
        });
        before - self.producers.len()
    }

    /// The epoch `producer_id` is at here, if it is known.
    pub fn epoch_of(&self, producer_id: i64) -> Option<i16> {
        self.producers.get(&producer_id).map(|e| e.epoch)
    }

    /// True when the batch of `producer_id` ending at `last_offset` is one the table
    /// remembers (to answer a retry or continue the sequence): compaction keeps it.
    pub fn remembers(&self, producer_id: i64, last_offset: Offset) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.batches.iter().any(|b| b.last_offset == last_offset))
    }

    /// Every producer known here: its id, epoch, the sequence of its last batch (-1
    /// after a marker fenced it) and that batch's max timestamp (-1 likewise), as
    /// DescribeProducers reports them.
    pub fn describe(&self) -> Vec<(i64, i16, i32, i64)> {
        let mut out: Vec<(i64, i16, i32, i64)> = self
            .producers
            .iter()
            .map(|(id, e)| {
                let last = e.batches.back();
                (
                    *id,
                    e.epoch,
                    last.map_or(-1, |b| b.last),
                    last.map_or(-1, |b| b.max_timestamp),
                )
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Number of producers known.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// True when no producer is known.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(first: i32, last: i32, base: u64) -> BatchSequence {
        BatchSequence {
            first,
            last,
            base_offset: Offset(base),
            last_offset: Offset(base + (last - first) as u64),
            max_timestamp: 0,
        }
    }

    #[test]
    fn duplicates_gaps_and_old_epochs() {
        let mut s = ProducerStates::default();
        assert_eq!(s.check(7, 0, 0, 4), Ok(SequenceCheck::Append));
        s.record(7, 0, b(0, 4, 100));
        assert_eq!(s.check(7, 0, 5, 9), Ok(SequenceCheck::Append));
        s.record(7, 0, b(5, 9, 105));
        assert_eq!(
            s.check(7, 0, 0, 4),
            Ok(SequenceCheck::Duplicate {
                base_offset: Offset(100),
                last_offset: Offset(104)
            })
        );
        assert!(matches!(
            s.check(7, 0, 12, 13),
            Err(SequenceError::OutOfOrder { expected: 10, .. })
        ));
        assert!(matches!(
            s.check(7, 0, 3, 3),
            Err(SequenceError::OutOfOrder { .. })
        ));
        assert_eq!(
            s.check(7, 1, 0, 0),
            Ok(SequenceCheck::Append),
            "a new epoch starts at 0"
        );
        assert!(matches!(
            s.check(7, 1, 5, 5),
            Err(SequenceError::OutOfOrder { .. })
        ));
        s.record(7, 1, b(0, 0, 110));
        assert!(matches!(
            s.check(7, 0, 10, 10),
            Err(SequenceError::StaleEpoch { current: 1, .. })
        ));
        assert_eq!(
            s.check(8, 0, 42, 43),
            Ok(SequenceCheck::Append),
            "unknown producers are accepted"
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut s = ProducerStates::default();
        for i in 0..7 {
            s.record(1, 0, b(i, i, i as u64));
        }
        assert!(matches!(
            s.check(1, 0, 0, 0),
            Err(SequenceError::StoredLongAgo { oldest: 2, .. })
        ));
        assert!(matches!(
            s.check(1, 0, 2, 2),
            Ok(SequenceCheck::Duplicate { .. })
        ));
    }

    #[test]
    fn a_batch_older_than_those_remembered_is_stored_and_a_gap_is_not() {
        let mut s = ProducerStates::default();
        // The campaign's case: batch 3845..=3858 went to a leader that was cut off; the
        // next leader had copied it and acknowledged many batches after it.
        s.record(1, 0, b(3845, 3858, 3845));
        for i in 3859..3900 {
            s.record(1, 0, b(i, i, i as u64));
        }
        assert!(matches!(
            s.check(1, 0, 3845, 3858),
            Err(SequenceError::StoredLongAgo { oldest: 3895, .. })
        ));
        assert!(matches!(
            s.check(1, 0, 3901, 3901),
            Err(SequenceError::OutOfOrder { expected: 3900, .. })
        ));
        assert!(
            matches!(
                s.check(1, 0, 3890, 3896),
                Err(SequenceError::OutOfOrder { .. })
            ),
            "a batch reaching into the remembered ones is not one of them"
        );
        // Across the wrap: sequences just below i32::MAX come before those from 0.
        let mut w = ProducerStates::default();
        for i in 0..6 {
            w.record(2, 0, b(i, i, 10 + i as u64));
        }
        assert!(matches!(
            w.check(2, 0, i32::MAX - 3, i32::MAX),
            Err(SequenceError::StoredLongAgo { .. })
        ));
        assert!(precedes(i32::MAX, 0) && !precedes(0, i32::MAX) && !precedes(4, 4));
    }

    #[test]
    fn sequences_wrap_like_kafkas() {
        assert_eq!(sequence_after(5, 1), 6);
        assert_eq!(sequence_after(i32::MAX, 1), 0);
        assert_eq!(sequence_after(i32::MAX - 1, 3), 1);
    }

    #[test]
    fn producers_silent_past_the_expiration_are_forgotten_unless_kept() {
        const DAY_MS: i64 = 86_400_000;
        let mut s = ProducerStates::default();
        s.record(1, 0, b(0, 0, 0));
        s.record(2, 0, b(0, 0, 1));
        // Stamped before any pass: the first pass starts their time.
        assert_eq!(s.expire(10 * DAY_MS, DAY_MS, |_| false), 0);
        assert_eq!(s.expire(10 * DAY_MS + DAY_MS / 2, DAY_MS, |_| false), 0);
        // Stamped with the half-day pass.
        s.record(1, 0, b(1, 1, 2));
        s.fence(3, 1);
        assert_eq!(s.expire(10 * DAY_MS + DAY_MS, DAY_MS, |_| false), 0);
        // A day and a moment after the pass before its last batch, producer 2 goes; 1
        // and 3 wrote later.
        assert_eq!(s.expire(10 * DAY_MS + DAY_MS + 1, DAY_MS, |_| false), 1);
        assert_eq!(s.epoch_of(2), None);
        assert_eq!(s.check(2, 0, 7, 7), Ok(SequenceCheck::Append), "new again");
        // Producer 1 has a transaction open: kept however long it is silent.
        assert_eq!(s.expire(20 * DAY_MS, DAY_MS, |id| id == 1), 1);
        assert_eq!(s.epoch_of(1), Some(0));
        assert_eq!(s.epoch_of(3), None);
    }
}
