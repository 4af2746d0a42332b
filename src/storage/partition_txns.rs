//! The transactions of one partition, as its log shows them: which producers have a
//! transaction open here and from which offset, which ended transactions were aborted
//! (the list a `read_committed` fetch returns so the consumer drops their records), and
//! so the *last stable offset* (LSO): the first offset a `read_committed` consumer may
//! not read yet. Kafka's `ProducerStateManager` (ongoing transactions) and
//! `TransactionIndex` (aborted ones), kept by the partition log under its append lock
//! and checkpointed beside it (see `partition_log::transactions`).
//!
//! A transaction is *open* from its first transactional batch to its marker, and
//! *unstable* until the marker is below the high watermark: Kafka's LSO is the first
//! offset of the oldest unstable transaction, or the high watermark when there is none.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::Offset;

/// A transaction that ended with an ABORT marker: its records lie in
/// `first_offset..=last_offset` (the marker's offset), interleaved with others'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortedTxn {
    /// The producer whose records to drop.
    pub producer_id: i64,
    /// Offset of its first record here.
    pub first_offset: Offset,
    /// Offset of the ABORT marker.
    pub last_offset: Offset,
}

/// What a batch does to the partition's transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnBatch {
    /// A batch of records in the producer's transaction.
    Data,
    /// A COMMIT (`true`) or ABORT (`false`) marker ending it.
    Marker {
        /// True for COMMIT.
        commit: bool,
    },
}

/// The partition's transactions. Plain data: the partition log feeds it every stored
/// transactional batch in offset order and asks it for the LSO and aborted ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionTxns {
    /// Producer id → first offset of its open transaction.
    open: HashMap<i64, Offset>,
    /// Ended transactions whose marker may not be below the high watermark yet, as
    /// (producer id, first offset, marker offset), in marker order.
    ending: VecDeque<(i64, Offset, Offset)>,
    /// Aborted transactions in marker order.
    aborted: VecDeque<AbortedTxn>,
}

impl PartitionTxns {
    /// Records a stored transactional batch of `producer_id` at `base..=last`.
    pub fn record(&mut self, producer_id: i64, kind: TxnBatch, base: Offset, last: Offset) {
        match kind {
            TxnBatch::Data => {
                self.open.entry(producer_id).or_insert(base);
            }
            TxnBatch::Marker { commit } => {
                // A marker for a producer with nothing open here ends nothing (the
                // coordinator marks every partition of the transaction, some of which
                // may have received no record).
                let Some(first) = self.open.remove(&producer_id) else {
                    return;
                };
                self.ending.push_back((producer_id, first, last));
                if !commit {
                    self.aborted.push_back(AbortedTxn {
                        producer_id,
                        first_offset: first,
                        last_offset: last,
                    });
                }
            }
        }
    }

    /// The last stable offset under `high_watermark`: the first offset of the oldest
    /// transaction still open, or ended by a marker not yet below the high watermark;
    /// the high watermark itself when there is none. Never above the high watermark.
    pub fn last_stable(&self, high_watermark: Offset) -> Offset {
        let open = self.open.values().copied().min();
        let ending = self
            .ending
            .iter()
            .filter(|(_, _, marker)| *marker >= high_watermark)
            .map(|(_, first, _)| *first)
            .min();
        [open, ending]
            .into_iter()
            .flatten()
            .fold(high_watermark, Offset::min)
    }

    /// Forgets ended transactions whose marker is below `high_watermark` (they no longer
    /// hold the LSO back).
    pub fn settle(&mut self, high_watermark: Offset) {
        self.ending
            .retain(|(_, _, marker)| *marker >= high_watermark);
    }

    /// The aborted transactions with records in `from..to`: Kafka's list for a
    /// `read_committed` fetch of that range.
    pub fn aborted_in(&self, from: Offset, to: Offset) -> impl Iterator<Item = &AbortedTxn> {
        self.aborted
            .iter()
            .filter(move |a| a.last_offset >= from && a.first_offset < to)
    }

    /// True when a record of `producer_id` at `offset` belongs to an aborted
    /// transaction (the compactor drops such records).
    pub fn is_aborted(&self, producer_id: i64, offset: Offset) -> bool {
        self.aborted.iter().any(|a| {
            a.producer_id == producer_id && a.first_offset <= offset && offset < a.last_offset
        })
    }

    /// Forgets aborted transactions wholly below `log_start` (retention or DeleteRecords
    /// removed their records).
    pub fn forget_below(&mut self, log_start: Offset) {
        self.aborted.retain(|a| a.last_offset >= log_start);
    }

    /// Forgets everything at or past `end` (the log was cut there): a transaction whose
    /// marker went, committed or aborted, is open again (its outcome is the marker the
    /// new leader writes), an open one that began there goes. An aborted one is found
    /// in `aborted` even when its marker was already below the high watermark; a
    /// committed one only while it is `ending` (a cut never reaches below the high
    /// watermark a leader acknowledged).
    pub fn cut_at(&mut self, end: Offset) {
        self.open.retain(|_, first| *first < end);
        for a in self.aborted.iter() {
            if a.last_offset >= end && a.first_offset < end {
                self.open.insert(a.producer_id, a.first_offset);
            }
        }
        self.aborted.retain(|a| a.last_offset < end);
        let ending: Vec<(i64, Offset, Offset)> = self.ending.drain(..).collect();
        for (producer_id, first, marker) in ending {
            if marker < end {
                self.ending.push_back((producer_id, first, marker));
            } else if first < end {
                self.open.insert(producer_id, first);
            }
        }
    }

    /// Producers with a transaction open here, with its first offset.
    pub fn open(&self) -> impl Iterator<Item = (i64, Offset)> + '_ {
        self.open.iter().map(|(p, o)| (*p, *o))
    }

    /// True when `producer_id` has a transaction open here.
    pub fn is_open(&self, producer_id: i64) -> bool {
        self.open.contains_key(&producer_id)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn an_open_transaction_holds_the_lso_until_its_marker_is_committed() {
        let mut t = PartitionTxns::default();
        t.record(7, TxnBatch::Data, Offset(10), Offset(12));
        t.record(8, TxnBatch::Data, Offset(13), Offset(13));
        t.record(7, TxnBatch::Data, Offset(14), Offset(15));
        assert_eq!(t.last_stable(Offset(16)), Offset(10));
        t.record(7, TxnBatch::Marker { commit: true }, Offset(16), Offset(16));
        assert_eq!(
            t.last_stable(Offset(16)),
            Offset(10),
            "marker not committed"
        );
        assert_eq!(t.last_stable(Offset(17)), Offset(13), "8 is still open");
        t.record(
            8,
            TxnBatch::Marker { commit: false },
            Offset(17),
            Offset(17),
        );
        assert_eq!(t.last_stable(Offset(18)), Offset(18));
        t.settle(Offset(18));
        assert!(t.ending.is_empty());
        let aborted: Vec<_> = t.aborted_in(Offset(0), Offset(18)).copied().collect();
        assert_eq!(
            aborted,
            vec![AbortedTxn {
                producer_id: 8,
                first_offset: Offset(13),
                last_offset: Offset(17)
            }]
        );
        assert_eq!(t.aborted_in(Offset(18), Offset(30)).count(), 0);
        assert!(t.is_aborted(8, Offset(13)) && !t.is_aborted(7, Offset(14)));
        assert_eq!(t.aborted_in(Offset(0), Offset(13)).count(), 0);
    }

    #[test]
    fn a_marker_without_records_here_ends_nothing() {
        let mut t = PartitionTxns::default();
        t.record(3, TxnBatch::Marker { commit: false }, Offset(0), Offset(0));
        assert_eq!(t, PartitionTxns::default());
    }

    #[test]
    fn a_cut_reopens_a_transaction_whose_marker_went() {
        let mut t = PartitionTxns::default();
        t.record(1, TxnBatch::Data, Offset(0), Offset(4));
        t.record(1, TxnBatch::Marker { commit: false }, Offset(5), Offset(5));
        t.record(2, TxnBatch::Data, Offset(6), Offset(6));
        t.cut_at(Offset(5));
        assert!(t.is_open(1));
        assert!(!t.is_open(2));
        assert_eq!(t.aborted_in(Offset(0), Offset(10)).count(), 0);
        assert_eq!(t.last_stable(Offset(5)), Offset(0));
    }

    #[test]
    fn a_cut_reopens_a_committed_transaction_whose_marker_went() {
        let mut t = PartitionTxns::default();
        t.record(1, TxnBatch::Data, Offset(0), Offset(4));
        t.record(1, TxnBatch::Marker { commit: true }, Offset(5), Offset(5));
        t.settle(Offset(5));
        t.cut_at(Offset(5));
        assert!(t.is_open(1), "its records must not read as committed");
        assert_eq!(t.last_stable(Offset(5)), Offset(0));
    }

    /// One step of a partition's history: a producer's data batch or marker.
    #[derive(Debug, Clone)]
    enum Step {
        Data(i64, u64),
        Marker(i64, bool),
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        prop::collection::vec(
            prop_oneof![
                (0i64..4, 1u64..4).prop_map(|(p, n)| Step::Data(p, n)),
                (0i64..4, any::<bool>()).prop_map(|(p, c)| Step::Marker(p, c)),
            ],
            0..60,
        )
    }

    proptest! {
        /// Against a model that tags every offset with its producer and fate: the LSO is
        /// the first offset of a record whose transaction is not decided below the high
        /// watermark, and the aborted list names exactly the aborted records, also after
        /// the log's tail is cut.
        #[test]
        fn the_lso_and_aborted_list_match_a_per_offset_model(history in steps(), cut_back in 0u64..6, hw_back in 0u64..10) {
            let mut t = PartitionTxns::default();
            // Per offset: (producer, Some(marker offset, commit) once decided).
            let mut offsets: Vec<(i64, bool)> = Vec::new();
            let mut fate: Vec<Option<(u64, bool)>> = Vec::new();
            for step in &history {
                let base = offsets.len() as u64;
                match *step {
                    Step::Data(p, n) => {
                        t.record(p, TxnBatch::Data, Offset(base), Offset(base + n - 1));
                        for _ in 0..n {
                            offsets.push((p, false));
                            fate.push(None);
                        }
                    }
                    Step::Marker(p, commit) => {
                        t.record(p, TxnBatch::Marker { commit }, Offset(base), Offset(base));
                        for (i, (q, _)) in offsets.iter().enumerate() {
                            if *q == p && fate[i].is_none() {
                                fate[i] = Some((base, commit));
                            }
                        }
                        offsets.push((p, true));
                        fate.push(Some((base, true)));
                    }
                }
            }
            // A follower's divergent tail cut: what was past it never happened, and a
            // transaction whose marker went is undecided again.
            let end = (offsets.len() as u64).saturating_sub(cut_back);
            t.cut_at(Offset(end));
            offsets.truncate(end as usize);
            fate.truncate(end as usize);
            for f in fate.iter_mut() {
                if f.is_some_and(|(m, _)| m >= end) {
                    *f = None;
                }
            }
            let hw = end.saturating_sub(hw_back);
            let expected_lso = (0..hw)
                .find(|&i| fate[i as usize].is_none_or(|(m, _)| m >= hw))
                .unwrap_or(hw);
            prop_assert_eq!(t.last_stable(Offset(hw)), Offset(expected_lso));
            for i in 0..end {
                let (p, marker) = offsets[i as usize];
                let aborted_here = t
                    .aborted_in(Offset(i), Offset(i + 1))
                    .any(|a| a.producer_id == p && a.first_offset.0 <= i && i < a.last_offset.0);
                let model = !marker && matches!(fate[i as usize], Some((_, false)));
                prop_assert_eq!(aborted_here, model, "offset {}", i);
            }
        }
    }
}
