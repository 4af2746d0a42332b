//! The coordinator's transitions, case by case and as a property over random request
//! sequences from a current producer and its zombies.

use proptest::prelude::*;

use super::*;

const MAX: i32 = 900_000;

fn ready(outcome: InitOutcome, id: i64) -> TxnMetadata {
    match outcome.with_producer_id(id) {
        InitOutcome::Ready {
            meta,
            new_producer_id: false,
        } => meta,
        other => panic!("not ready: {other:?}"),
    }
}

fn p(topic: &str, n: u32) -> (String, u32) {
    (topic.to_string(), n)
}

#[test]
fn a_transaction_commits_and_the_next_init_bumps_the_epoch() {
    let m = ready(init(None, 60_000, MAX, None, 0).expect("init"), 7);
    assert_eq!(
        (m.producer_id, m.producer_epoch, m.state),
        (7, 0, TxnState::Empty)
    );
    let m = add(Some(&m), 7, 0, &[p("a", 0)], &[], 1)
        .expect("add")
        .expect("changed");
    assert_eq!((m.state, m.started_ms), (TxnState::Ongoing, 1));
    assert_eq!(
        add(Some(&m), 7, 0, &[p("a", 0)], &[], 2),
        Ok(None),
        "already in"
    );
    let EndOutcome::Prepare(m) = end(Some(&m), 7, 0, true, TxnProtocol::V1, 3).expect("end") else {
        panic!("prepare")
    };
    assert_eq!(m.state, TxnState::PrepareCommit);
    assert!(
        !m.markers_bump_epoch,
        "V1 markers carry the transaction's epoch"
    );
    assert_eq!(
        add(Some(&m), 7, 0, &[p("b", 0)], &[], 4),
        Err(ResponseError::ConcurrentTransactions)
    );
    assert_eq!(
        end(Some(&m), 7, 0, false, TxnProtocol::V1, 4),
        Err(ResponseError::InvalidTxnState)
    );
    let m = complete(&m, 5).expect("complete");
    assert_eq!(m.state, TxnState::CompleteCommit);
    assert!(m.partitions.is_empty());
    assert_eq!(
        end(Some(&m), 7, 0, true, TxnProtocol::V1, 6),
        Ok(EndOutcome::AlreadyDone)
    );
    assert_eq!(
        end(Some(&m), 7, 0, false, TxnProtocol::V1, 6),
        Err(ResponseError::InvalidTxnState)
    );
    let again = ready(init(Some(&m), 60_000, MAX, None, 7).expect("init"), 99);
    assert_eq!((again.producer_id, again.producer_epoch), (7, 1));
}

#[test]
fn a_new_instance_aborts_the_open_transaction_and_fences_the_old_one() {
    let m = ready(init(None, 60_000, MAX, None, 0).expect("init"), 7);
    let m = add(Some(&m), 7, 0, &[p("a", 0)], &["g".into()], 1)
        .expect("add")
        .expect("changed");
    let InitOutcome::AbortFirst(fenced) = init(Some(&m), 60_000, MAX, None, 2).expect("init")
    else {
        panic!("abort first")
    };
    assert_eq!(
        (
            fenced.state,
            fenced.producer_epoch,
            fenced.markers_bump_epoch
        ),
        (TxnState::PrepareAbort, 1, true)
    );
    assert_eq!(fenced.partitions, m.partitions, "markers go where it wrote");
    assert_eq!(
        init(Some(&fenced), 60_000, MAX, None, 3),
        Err(ResponseError::ConcurrentTransactions),
        "the client retries until the abort completes"
    );
    let done = complete(&fenced, 4).expect("complete");
    assert_eq!(
        end(Some(&done), 7, 0, true, TxnProtocol::V1, 5),
        Err(ResponseError::ProducerFenced),
        "the zombie's commit"
    );
    let next = ready(init(Some(&done), 60_000, MAX, None, 6).expect("init"), 0);
    assert_eq!(next.producer_epoch, 2);
}

#[test]
fn bad_requests_get_kafkas_errors() {
    assert_eq!(
        init(None, MAX + 1, MAX, None, 0),
        Err(ResponseError::InvalidTransactionTimeout)
    );
    let m = ready(init(None, 100, MAX, None, 0).expect("init"), 7);
    assert_eq!(
        add(Some(&m), 8, 0, &[p("a", 0)], &[], 1),
        Err(ResponseError::InvalidProducerIdMapping)
    );
    assert_eq!(
        add(None, 7, 0, &[p("a", 0)], &[], 1),
        Err(ResponseError::InvalidProducerIdMapping)
    );
    assert_eq!(
        end(Some(&m), 7, 0, true, TxnProtocol::V1, 1),
        Err(ResponseError::InvalidTxnState),
        "nothing open"
    );
    assert_eq!(
        init(Some(&m), 100, MAX, Some((7, 5)), 1),
        Err(ResponseError::ProducerFenced)
    );
}

#[test]
fn a_timed_out_transaction_is_aborted_at_the_next_epoch() {
    let m = ready(init(None, 100, MAX, None, 0).expect("init"), 7);
    let m = add(Some(&m), 7, 0, &[p("a", 0)], &[], 1000)
        .expect("add")
        .expect("changed");
    assert_eq!(expire(&m, 1100), None);
    let aborted = expire(&m, 1101).expect("expired");
    assert_eq!(
        (aborted.state, aborted.producer_epoch),
        (TxnState::PrepareAbort, 1)
    );
}

#[test]
fn a_retried_init_gets_the_same_epoch_and_an_exhausted_epoch_a_new_id() {
    let m = ready(init(None, 100, MAX, None, 0).expect("init"), 7);
    let bumped = ready(init(Some(&m), 100, MAX, Some((7, 0)), 1).expect("init"), 0);
    assert_eq!(bumped.producer_epoch, 1);
    let retried = ready(
        init(Some(&bumped), 100, MAX, Some((7, 0)), 2).expect("init"),
        0,
    );
    assert_eq!(retried, bumped);
    let worn = TxnMetadata {
        producer_epoch: ProducerEpoch::MAX.0,
        ..bumped
    };
    let InitOutcome::Ready {
        meta,
        new_producer_id: true,
    } = init(Some(&worn), 100, MAX, None, 3).expect("init")
    else {
        panic!("a new id")
    };
    assert_eq!(meta.producer_epoch, 0);
}

#[test]
fn transactions_v2_bump_the_epoch_and_a_delayed_end_cannot_end_the_next_one() {
    let m = ready(init(None, 60_000, MAX, None, 0).expect("init"), 7);
    let m = add(Some(&m), 7, 0, &[p("a", 0)], &[], 1)
        .expect("add")
        .expect("changed");
    let EndOutcome::Prepare(m) = end(Some(&m), 7, 0, true, TxnProtocol::V2, 2).expect("end") else {
        panic!("prepare")
    };
    assert_eq!(
        (m.state, m.producer_epoch, m.markers_bump_epoch),
        (TxnState::PrepareCommit, 1, true)
    );
    assert_eq!(
        next_producer(&m),
        (7, 1),
        "the answer carries the next epoch"
    );
    // A retry from the epoch just ended, before and after the markers.
    assert_eq!(
        end(Some(&m), 7, 0, true, TxnProtocol::V2, 3),
        Err(ResponseError::ConcurrentTransactions)
    );
    let m = complete(&m, 4).expect("complete");
    assert_eq!(
        end(Some(&m), 7, 0, true, TxnProtocol::V2, 5),
        Ok(EndOutcome::AlreadyDone)
    );
    assert_eq!(
        end(Some(&m), 7, 0, false, TxnProtocol::V2, 5),
        Err(ResponseError::ProducerFenced)
    );
    // The next transaction, at epoch 1: the delayed EndTxn of epoch 0 cannot end it.
    let next = add(Some(&m), 7, 1, &[p("b", 0)], &[], 6)
        .expect("add")
        .expect("opened");
    assert_eq!(next.state, TxnState::Ongoing);
    assert_eq!(
        end(Some(&next), 7, 0, true, TxnProtocol::V2, 7),
        Err(ResponseError::ProducerFenced)
    );
    // An end the coordinator never saw open (nothing was enrolled) ends empty.
    let EndOutcome::Prepare(empty) = end(Some(&m), 7, 1, false, TxnProtocol::V2, 8).expect("end")
    else {
        panic!("prepare")
    };
    assert_eq!((empty.producer_epoch, empty.partitions.len()), (2, 0));
    // The last epoch: the next transaction moves to a fresh producer id.
    let worn = TxnMetadata {
        producer_epoch: ProducerEpoch::MAX.0 - 1,
        ..next
    };
    let EndOutcome::Prepare(last) = end(
        Some(&worn),
        7,
        ProducerEpoch::MAX.0 - 1,
        true,
        TxnProtocol::V2,
        9,
    )
    .expect("end") else {
        panic!("prepare")
    };
    assert!(needs_next_producer_id(&last));
    let last = with_next_producer_id(last, 8);
    assert_eq!(next_producer(&last), (8, 0));
    let done = complete(&last, 10).expect("complete");
    assert_eq!((done.producer_id, done.producer_epoch), (8, 0));
    // The EndTxn that used up the epochs, retried after its answer was lost, is
    // answered as the first was (the producer learns id 8 again); the other outcome
    // from that epoch is fenced; once id 8 has ended a transaction, id 7 is no longer
    // the id's producer at all (Kafka: INVALID_PRODUCER_ID_MAPPING).
    assert_eq!(
        end(
            Some(&done),
            7,
            ProducerEpoch::MAX.0 - 1,
            true,
            TxnProtocol::V2,
            11
        ),
        Ok(EndOutcome::AlreadyDone)
    );
    assert_eq!(next_producer(&done), (8, 0));
    assert_eq!(
        end(
            Some(&done),
            7,
            ProducerEpoch::MAX.0 - 1,
            false,
            TxnProtocol::V2,
            11
        ),
        Err(ResponseError::ProducerFenced)
    );
    let EndOutcome::Prepare(later) =
        end(Some(&done), 8, 0, true, TxnProtocol::V2, 12).expect("end")
    else {
        panic!("prepare")
    };
    let later = complete(&later, 13).expect("complete");
    assert_eq!(
        end(
            Some(&later),
            7,
            ProducerEpoch::MAX.0 - 1,
            true,
            TxnProtocol::V2,
            14
        ),
        Err(ResponseError::InvalidProducerIdMapping)
    );
    assert!(add(Some(&done), 8, 0, &[p("a", 0)], &[], 11).is_ok());
}

/// A request from the producer at epoch `epoch_back` epochs behind the current one.
#[derive(Debug, Clone)]
enum Op {
    Init,
    Add(u32, u8),
    End(bool, u8, bool),
    Complete,
    Expire(i64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            Just(Op::Init),
            (0u32..3, 0u8..2).prop_map(|(n, back)| Op::Add(n, back)),
            (any::<bool>(), 0u8..2, any::<bool>()).prop_map(|(c, back, v2)| Op::End(c, back, v2)),
            Just(Op::Complete),
            (0i64..2000).prop_map(Op::Expire),
        ],
        1..50,
    )
}

proptest! {
    /// Whatever the order of requests: the epoch never goes back, a stale epoch never
    /// changes anything, a transaction ends only through a Prepare state and with the
    /// outcome that was prepared, and partitions are only recorded while one is open.
    #[test]
    fn stale_epochs_change_nothing_and_outcomes_are_never_reversed(ops in ops()) {
        let mut meta = ready(init(None, 1000, MAX, None, 0).expect("init"), 1);
        let mut now = 0i64;
        for op in ops {
            now += 10;
            let before = meta.clone();
            let result: Option<TxnMetadata> = match op {
                Op::Init => match init(Some(&meta), 1000, MAX, None, now) {
                    Ok(InitOutcome::Ready { meta, .. }) => Some(meta),
                    Ok(InitOutcome::AbortFirst(m)) => Some(m),
                    Err(_) => None,
                },
                Op::Add(n, back) => {
                    let epoch = meta.producer_epoch - i16::from(back);
                    let r = add(Some(&meta), 1, epoch, &[p("t", n)], &[], now);
                    if back > 0 {
                        prop_assert!(r.is_err(), "a stale epoch added");
                    }
                    r.ok().flatten()
                }
                Op::End(commit, back, v2) => {
                    let epoch = meta.producer_epoch - i16::from(back);
                    let protocol = if v2 { TxnProtocol::V2 } else { TxnProtocol::V1 };
                    match end(Some(&meta), 1, epoch, commit, protocol, now) {
                        Ok(EndOutcome::Prepare(m)) => {
                            prop_assert_eq!(back, 0, "a stale epoch ended a transaction");
                            if v2 {
                                prop_assert!(m.producer_epoch > meta.producer_epoch, "V2 bumps");
                            }
                            Some(m)
                        }
                        _ => None,
                    }
                }
                Op::Complete => complete(&meta, now),
                Op::Expire(age) => expire(&meta, meta.started_ms + age),
            };
            if let Some(next) = result {
                prop_assert!(next.producer_epoch >= before.producer_epoch);
                match (before.state, next.state) {
                    (TxnState::PrepareCommit, s) => prop_assert_eq!(s, TxnState::CompleteCommit),
                    (TxnState::PrepareAbort, s) => prop_assert_eq!(s, TxnState::CompleteAbort),
                    (_, TxnState::CompleteCommit) | (_, TxnState::CompleteAbort) => {
                        prop_assert!(false, "completed without preparing")
                    }
                    _ => {}
                }
                if !matches!(next.state, TxnState::Ongoing) && !next.state.is_preparing() {
                    prop_assert!(next.partitions.is_empty());
                }
                meta = next;
            }
        }
    }
}

#[test]
fn only_an_idle_id_unchanged_past_the_expiration_expires() {
    let mut m = ready(init(None, 60_000, MAX, None, 0).expect("init"), 7);
    m.state = TxnState::CompleteCommit;
    m.updated_ms = 1_000;
    assert!(!id_expired(&m, 1_000 + 500, 500));
    assert!(id_expired(&m, 1_000 + 501, 500));
    for busy in [
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
    ] {
        m.state = busy;
        assert!(!id_expired(&m, i64::MAX, 500), "{busy:?}");
    }
    for idle in [TxnState::Empty, TxnState::CompleteAbort] {
        m.state = idle;
        assert!(id_expired(&m, 1_000 + 501, 500), "{idle:?}");
    }
}
