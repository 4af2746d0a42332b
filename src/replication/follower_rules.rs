//! A follower's rules for one partition's fetch answer, decided apart from doing: what
//! the leader's answer means for this replica's log — append what came, cut a diverged
//! tail, start again at the leader's log start, or give up on this round. Pure: it
//! reads the replica's log through [`ReplicaLog`] and changes nothing, so every case is
//! a unit test (Kafka's `AbstractFetcherThread` decides the same way).

use kafka_protocol::{messages::fetch_response::PartitionData, ResponseError};

use crate::storage::{Offset, PartitionLog};

/// What the rules read of the replica's own log.
pub trait ReplicaLog {
    /// The offset the next appended record gets.
    fn log_end(&self) -> Offset;
    /// Where this replica's records of leader epoch `epoch` end: the start of the next
    /// epoch it holds, its log end for the latest, `None` for an epoch it has nothing
    /// of at or after.
    fn epoch_end(&self, epoch: i32) -> Option<Offset>;
}

impl ReplicaLog for PartitionLog {
    fn log_end(&self) -> Offset {
        PartitionLog::log_end(self)
    }

    fn epoch_end(&self, epoch: i32) -> Option<Offset> {
        PartitionLog::epoch_end(self, epoch).map(|e| e.end_offset)
    }
}

/// What to do with one partition's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Append the answer's records (if any) and follow the leader's high watermark and
    /// log start.
    Append,
    /// This replica's tail diverged from the leader's: cut everything from this offset
    /// on, then fetch again from there.
    CutTail(Offset),
    /// The leader's log starts past everything this replica holds (retention or
    /// DeleteRecords there): start this log again, empty, at this offset.
    RestartAt(Offset),
    /// The leader refused this partition's fetch; try again later.
    Refused(ResponseError),
}

/// What `answer` asks of the replica whose log is `local`.
pub fn next_step(answer: &PartitionData, local: &impl ReplicaLog) -> NextStep {
    match ResponseError::try_from_code(answer.error_code) {
        None => {}
        Some(ResponseError::OffsetOutOfRange)
            if answer.log_start_offset > local.log_end().to_wire() =>
        {
            return NextStep::RestartAt(Offset(answer.log_start_offset as u64));
        }
        Some(e) => return NextStep::Refused(e),
    }
    let diverging = &answer.diverging_epoch;
    if diverging.epoch >= 0 || diverging.end_offset >= 0 {
        // The leader's end of the last epoch both logs have; this replica keeps what it
        // holds of that epoch up to there, and nothing past its own end.
        let leader_end = Offset(diverging.end_offset.max(0) as u64);
        let ours = local.epoch_end(diverging.epoch).unwrap_or(leader_end);
        return NextStep::CutTail(leader_end.min(ours).min(local.log_end()));
    }
    NextStep::Append
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::partition_log::LeaderEpochs;

    /// A replica log as its epochs' start offsets and its end, read through the same
    /// epoch table a partition log keeps.
    struct Log {
        epochs: Vec<(i32, u64)>,
        end: u64,
    }

    impl ReplicaLog for Log {
        fn log_end(&self) -> Offset {
            Offset(self.end)
        }

        fn epoch_end(&self, epoch: i32) -> Option<Offset> {
            let mut table = LeaderEpochs::default();
            for (e, start) in &self.epochs {
                table.observe(*e, Offset(*start));
            }
            table.end_of(epoch, Offset(self.end)).map(|e| e.end_offset)
        }
    }

    fn answer(
        error: Option<ResponseError>,
        log_start: i64,
        diverging: (i32, i64),
    ) -> PartitionData {
        let mut a = PartitionData::default();
        a.error_code = error.map_or(0, |e| e.code());
        a.log_start_offset = log_start;
        a.diverging_epoch.epoch = diverging.0;
        a.diverging_epoch.end_offset = diverging.1;
        a
    }

    const NO_DIVERGENCE: (i32, i64) = (-1, -1);

    #[test]
    fn an_answer_without_divergence_or_error_is_appended() {
        let log = Log {
            epochs: vec![(0, 0)],
            end: 10,
        };
        assert_eq!(
            next_step(&answer(None, 0, NO_DIVERGENCE), &log),
            NextStep::Append
        );
    }

    #[test]
    fn a_diverged_tail_is_cut_at_the_end_both_logs_share() {
        // This replica led epoch 1 past offset 10 and wrote 10..15 nobody else has;
        // the new leader (epoch 2) says epoch 1 ended at 10 for it.
        let log = Log {
            epochs: vec![(0, 0), (1, 5)],
            end: 15,
        };
        let step = next_step(&answer(None, 0, (1, 10)), &log);
        assert_eq!(step, NextStep::CutTail(Offset(10)));
        // The leader holds more of epoch 1 than this replica's next epoch leaves it:
        // cut where this replica's epoch 1 ends (its epoch 3 began at 8).
        let log = Log {
            epochs: vec![(0, 0), (1, 5), (3, 8)],
            end: 12,
        };
        assert_eq!(
            next_step(&answer(None, 0, (1, 10)), &log),
            NextStep::CutTail(Offset(8))
        );
    }

    #[test]
    fn a_cut_never_reaches_past_the_replicas_own_end() {
        let log = Log {
            epochs: vec![(0, 0)],
            end: 4,
        };
        assert_eq!(
            next_step(&answer(None, 0, (0, 9)), &log),
            NextStep::CutTail(Offset(4))
        );
    }

    #[test]
    fn an_epoch_the_replica_never_saw_cuts_at_the_leaders_end() {
        // Nothing at or before epoch 2 here (a replica that only ever had epoch 5):
        // the leader's end of epoch 2 is where the logs part.
        let log = Log {
            epochs: vec![(5, 20)],
            end: 30,
        };
        assert_eq!(
            next_step(&answer(None, 0, (2, 17)), &log),
            NextStep::CutTail(Offset(17))
        );
    }

    #[test]
    fn a_leader_whose_log_starts_past_this_end_restarts_the_replica_there() {
        let log = Log {
            epochs: vec![(0, 0)],
            end: 100,
        };
        let out_of_range = Some(ResponseError::OffsetOutOfRange);
        assert_eq!(
            next_step(&answer(out_of_range, 500, NO_DIVERGENCE), &log),
            NextStep::RestartAt(Offset(500))
        );
        // Out of range the other way (this replica is ahead of a leader's start):
        // not a reason to throw the log away.
        assert_eq!(
            next_step(&answer(out_of_range, 50, NO_DIVERGENCE), &log),
            NextStep::Refused(ResponseError::OffsetOutOfRange)
        );
    }

    #[test]
    fn any_other_error_is_a_refusal_and_changes_nothing() {
        let log = Log {
            epochs: vec![(0, 0)],
            end: 3,
        };
        for e in [
            ResponseError::NotLeaderOrFollower,
            ResponseError::FencedLeaderEpoch,
            ResponseError::UnknownLeaderEpoch,
        ] {
            assert_eq!(
                next_step(&answer(Some(e), 0, (0, 1)), &log),
                NextStep::Refused(e),
                "{e:?}"
            );
        }
    }
}
