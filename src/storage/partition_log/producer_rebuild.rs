//! Idempotent producers' state: checking a payload's sequences against what the log
//! stored, rebuilding the state from the log's tail when it is opened, and forgetting
//! producers that have been silent too long.

use std::{cell::RefCell, time::Duration};

use super::{LogState, PartitionLog};
use crate::storage::{
    producer_state::{sequence_after, BatchSequence, ProducerStates, SequenceCheck, SequenceError},
    record_batch::ProducePayload,
    segment_reader::{SegmentReader, SCAN_WINDOW_BYTES},
    FilePosition, Offset, Result,
};

/// Checks an idempotent producer's batches against what the partition stored. Returns
/// the original offsets when the payload is one batch that is already stored.
pub(super) fn check_sequences(
    producers: &ProducerStates,
    payload: &ProducePayload,
) -> Result<Option<(Offset, Offset)>> {
    let single = payload.batch_count() == 1;
    let mut scratch: Option<ProducerStates> = None;
    for (i, batch) in payload.batches().enumerate() {
        let producer_id = batch.producer_id();
        if producer_id < 0 {
            continue;
        }
        if batch.is_control() {
            // A marker carries no sequence; one from an older epoch is a stale
            // coordinator's (or a fenced producer's) and is refused.
            let epoch = batch.producer_epoch();
            match producers.epoch_of(producer_id) {
                Some(current) if epoch < current => {
                    return Err(SequenceError::StaleEpoch {
                        producer_id,
                        epoch,
                        current,
                    }
                    .into())
                }
                _ => continue,
            }
        }
        let first = batch.base_sequence();
        let last = sequence_after(first, batch.last_offset_delta());
        let states = scratch.as_ref().unwrap_or(producers);
        match states.check(producer_id, batch.producer_epoch(), first, last)? {
            SequenceCheck::Duplicate {
                base_offset,
                last_offset,
            } if single => return Ok(Some((base_offset, last_offset))),
            SequenceCheck::Duplicate { .. } => {
                return Err(SequenceError::DuplicateInPayload { producer_id }.into())
            }
            SequenceCheck::Append if payload.batch_count() > i + 1 => {
                // Later batches of this payload must continue this one's sequence.
                let s = scratch.get_or_insert_with(|| producers.clone());
                s.record(
                    producer_id,
                    batch.producer_epoch(),
                    BatchSequence {
                        first,
                        last,
                        base_offset: Offset(0),
                        last_offset: Offset(0),
                        max_timestamp: -1,
                    },
                );
            }
            SequenceCheck::Append => {}
        }
    }
    Ok(None)
}

/// How much of the log's tail recovery rescans to rebuild idempotent producers' state.
/// Retries arrive within the client's delivery timeout (two minutes by default), so a
/// batch older than this much data is not retried; its producer is treated as new.
const PRODUCER_STATE_SCAN_BYTES: u64 = 64 << 20;

impl PartitionLog {
    /// Replays the batch headers of the last [`PRODUCER_STATE_SCAN_BYTES`] of the log
    /// into the producer state table, and the leader epochs they carry into the epoch
    /// table (after the checkpoint's, which cover the rest of the log).
    pub(super) async fn rebuild_producer_states(&self) -> Result<()> {
        let plan: Vec<(SegmentReader, FilePosition)> = {
            let st = self.shared.state.borrow();
            let mut left = PRODUCER_STATE_SCAN_BYTES;
            let mut plan = Vec::new();
            for segment in st.segments.iter().rev() {
                let size = segment.size();
                let from = size.saturating_sub(left);
                // Start at an indexed batch boundary at or before `from`.
                let start = segment
                    .index()
                    .offsets()
                    .entries()
                    .iter()
                    .rev()
                    .map(|e| u64::from(e.position))
                    .find(|&p| p <= from)
                    .unwrap_or(0);
                plan.push((self.reader(segment), FilePosition(start)));
                left = left.saturating_sub(size);
                if left == 0 {
                    break;
                }
            }
            plan.reverse();
            plan
        };
        let mut producers = ProducerStates::default();
        let epochs = RefCell::new(Vec::new());
        for (reader, start) in plan {
            let seen = RefCell::new(Vec::new());
            reader
                .find(start, SCAN_WINDOW_BYTES, |h| {
                    if h.producer_id >= 0 {
                        // Markers are kept too: they fence older epochs.
                        seen.borrow_mut().push(*h);
                    }
                    // Leader epochs begin where the epoch first appears.
                    let mut epochs = epochs.borrow_mut();
                    if epochs.last().is_none_or(|(e, _)| *e < h.leader_epoch) {
                        epochs.push((h.leader_epoch, Offset(h.base_offset.max(0) as u64)));
                    }
                    false
                })
                .await?;
            for h in seen.into_inner() {
                if h.is_control() {
                    producers.fence(h.producer_id, h.producer_epoch);
                    continue;
                }
                producers.record(
                    h.producer_id,
                    h.producer_epoch,
                    BatchSequence {
                        first: h.base_sequence,
                        last: sequence_after(h.base_sequence, h.last_offset_delta),
                        base_offset: Offset(h.base_offset as u64),
                        last_offset: Offset(h.last_offset() as u64),
                        max_timestamp: h.max_timestamp,
                    },
                );
            }
        }
        let mut st = self.shared.state.borrow_mut();
        st.producers = producers;
        for (epoch, start) in epochs.into_inner() {
            st.epochs.observe(epoch, start);
        }
        Ok(())
    }

    /// Forgets the idempotent producers that wrote nothing here for longer than
    /// `expiration` (`--producer-id-expiration`), keeping those with a transaction open
    /// in this partition; returns how many were forgotten. Run by the shard's retention
    /// pass, whose time stamps the producers' next batches.
    pub fn expire_producers(&self, expiration: Duration) -> usize {
        let now = self.shared.env.clock.now_ms();
        let mut st = self.shared.state.borrow_mut();
        let LogState {
            producers, txns, ..
        } = &mut *st;
        producers.expire(now, expiration.as_millis() as i64, |id| txns.is_open(id))
    }
}
