//! The coordinator's steps in one process, as Kafka's `TransactionCoordinatorTest`
//! tests its own: a fake host (which ids it coordinates, where markers go, whether
//! writing them fails, a manual clock, a producer id counter) over the real state
//! manager (a real LMDB store and a real state log on the project disk). Each case
//! runs in milliseconds.

use std::{
    cell::{Cell, RefCell},
    rc::Rc,
    sync::Arc,
    time::Duration,
};

use super::*;
use crate::{
    group::offset_store::OffsetStore,
    ids::ProducerEpoch,
    metrics::{BrokerMetrics, ControllerMetrics, ShardMetrics},
    storage::test_support::{run, start_storage, test_dir},
    txn::{peer::Peers, state_log::StateLog},
};

/// The node the fake host is.
const HERE: i32 = 0;
/// The node that leads every partition of a topic named `remote…`.
const THERE: i32 = 7;
/// The transaction timeout the producers ask for.
const TIMEOUT_MS: i32 = 60_000;

/// Topics and partitions, as markers name them.
type Partitions = Vec<(String, u32)>;

/// A shard as the coordinator sees it, every answer set by the test.
struct FakeHost {
    now_ms: Cell<i64>,
    coordinates: Cell<bool>,
    markers_fail: Cell<bool>,
    next_producer_id: Cell<i64>,
    written_here: RefCell<Vec<(Marker, Partitions)>>,
    sent: RefCell<Vec<(Marker, Vec<MarkerTarget>)>>,
}

impl FakeHost {
    fn new() -> Rc<FakeHost> {
        Rc::new(FakeHost {
            now_ms: Cell::new(1_000_000),
            coordinates: Cell::new(true),
            markers_fail: Cell::new(false),
            next_producer_id: Cell::new(100),
            written_here: RefCell::new(Vec::new()),
            sent: RefCell::new(Vec::new()),
        })
    }

    fn advance(&self, by: Duration) {
        self.now_ms.set(self.now_ms.get() + by.as_millis() as i64);
    }
}

impl TxnHost for FakeHost {
    async fn coordinating(&self, _id: &str) -> Result<Option<Journal>, ResponseError> {
        match self.coordinates.get() {
            true => Ok(None),
            false => Err(ResponseError::NotCoordinator),
        }
    }

    async fn catch_up(&self) {}

    fn coordinates(&self, _id: &str) -> bool {
        self.coordinates.get()
    }

    fn node(&self) -> i32 {
        HERE
    }

    fn marker_targets(&self, meta: &TxnMetadata) -> Result<Vec<(i32, MarkerTarget)>, String> {
        let mut out: Vec<(i32, MarkerTarget)> = Vec::new();
        for (topic, p) in &meta.partitions {
            let node = if topic.starts_with("remote") {
                THERE
            } else {
                HERE
            };
            match out.iter_mut().find(|(n, _)| *n == node) {
                Some((_, t)) => t.partitions.push((topic.clone(), *p)),
                None => out.push((
                    node,
                    MarkerTarget {
                        addr: format!("node-{node}"),
                        partitions: vec![(topic.clone(), *p)],
                    },
                )),
            }
        }
        Ok(out)
    }

    async fn write_markers_here(
        &self,
        end: Marker,
        partitions: &[(String, u32)],
    ) -> Result<(), String> {
        if self.markers_fail.get() && !partitions.is_empty() {
            return Err("marker refused".into());
        }
        self.written_here
            .borrow_mut()
            .push((end, partitions.to_vec()));
        Ok(())
    }

    async fn send_markers(&self, end: Marker, targets: &[MarkerTarget]) -> Result<(), String> {
        if self.markers_fail.get() && !targets.is_empty() {
            return Err("node unreachable".into());
        }
        self.sent.borrow_mut().push((end, targets.to_vec()));
        Ok(())
    }

    async fn allocate_producer_id(&self) -> Result<i64, ResponseError> {
        let id = self.next_producer_id.get();
        self.next_producer_id.set(id + 1);
        Ok(id)
    }

    fn now_ms(&self) -> i64 {
        self.now_ms.get()
    }
}

const LIMITS: CoordinatorLimits = CoordinatorLimits {
    timeout_max: Duration::from_secs(900),
    id_expiration: Duration::from_secs(7 * 24 * 3600),
};

/// Runs `case` with a coordinator over a fresh LMDB store and state log, and a fake
/// host.
fn with_coordinator<F>(case: impl FnOnce(Rc<Coordinator>, Rc<FakeHost>) -> F + 'static)
where
    F: std::future::Future<Output = ()>,
{
    let (data, lmdb) = (test_dir(), test_dir());
    let shard = data.path().to_path_buf();
    let store = Arc::new(OffsetStore::open(lmdb.path(), 1 << 22).expect("store"));
    run(async move {
        let storage = start_storage(&shard).await;
        let log = StateLog::open(&storage).await.expect("state log");
        let states = StateManager::new(
            Arc::clone(&store),
            Peers::new(weir_client::dialer::Dialer::plaintext()),
            Some(log),
        );
        let broker = BrokerMetrics::new(1, store as _, &ControllerMetrics::default());
        let metrics = ShardMetrics::new(broker, 0).transactions;
        let coordinator = Rc::new(Coordinator::new(states, metrics, LIMITS));
        case(Rc::clone(&coordinator), FakeHost::new()).await;
        coordinator.states().close().await;
        storage.shutdown().await;
    });
}

fn partitions(names: &[(&str, u32)]) -> Vec<(String, u32)> {
    names.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

/// Adds partition `a-0` to `t`'s transaction as `producer`, durably.
async fn add_a(
    c: &Coordinator,
    host: &FakeHost,
    producer: ProducerIdentity,
) -> Result<(), ResponseError> {
    let a = partitions(&[("a", 0)]);
    c.add(host, "t", producer, &a, &[], EnrolWait::Durable)
        .await
}

fn state_of(c: &Coordinator, id: &str) -> TxnMetadata {
    c.states().get(id).expect("read").expect("a state")
}

#[test]
fn a_new_id_gets_a_fresh_producer_and_each_init_bumps_its_epoch() {
    with_coordinator(async |c, host| {
        let first = c.init(&*host, "t", TIMEOUT_MS, None).await.expect("init");
        assert_eq!(first, ProducerIdentity::new(100, 0));
        let again = c
            .init(&*host, "t", TIMEOUT_MS, None)
            .await
            .expect("re-init");
        assert_eq!(again, ProducerIdentity::new(100, 1), "same id, next epoch");
        assert_eq!(state_of(&c, "t").state, TxnState::Empty);
        let other = c.init(&*host, "u", TIMEOUT_MS, None).await.expect("init");
        assert_eq!(other.id.0, 101, "another id, another producer");
    });
}

#[test]
fn every_step_refuses_an_id_this_shard_does_not_coordinate() {
    with_coordinator(async |c, host| {
        host.coordinates.set(false);
        let p = ProducerIdentity::new(1, 0);
        assert_eq!(
            c.init(&*host, "t", TIMEOUT_MS, None).await,
            Err(ResponseError::NotCoordinator)
        );
        assert_eq!(
            add_a(&c, &host, p).await,
            Err(ResponseError::NotCoordinator)
        );
        assert_eq!(
            c.end(&host, "t", p, true, TxnProtocol::V1).await,
            Err(ResponseError::NotCoordinator)
        );
        assert_eq!(c.states().get("t").expect("read"), None);
    });
}

#[test]
fn a_commit_whose_markers_are_all_here_completes_before_the_answer() {
    with_coordinator(async |c, host| {
        let p = c.init(&*host, "t", TIMEOUT_MS, None).await.expect("init");
        let parts = partitions(&[("a", 0), ("b", 3)]);
        c.add(&*host, "t", p, &parts, &[], EnrolWait::Appended)
            .await
            .expect("add");
        assert_eq!(state_of(&c, "t").state, TxnState::Ongoing);
        let next = c
            .end(&host, "t", p, true, TxnProtocol::V1)
            .await
            .expect("end");
        assert_eq!(next, p, "V1 keeps the epoch");
        let written = host.written_here.borrow().clone();
        assert_eq!(written.len(), 1);
        let (marker, marked) = &written[0];
        assert_eq!(marked, &parts);
        assert!(marker.commit);
        assert_eq!(marker.producer, p);
        assert_eq!(marker.ends, MarkerEnds::AtItsEpoch);
        assert!(host.sent.borrow().iter().all(|(_, t)| t.is_empty()));
        let done = state_of(&c, "t");
        assert_eq!(done.state, TxnState::CompleteCommit);
        assert!(done.partitions.is_empty());
    });
}

#[test]
fn a_v2_end_bumps_the_epoch_and_its_markers_end_only_earlier_epochs() {
    with_coordinator(async |c, host| {
        let p = c.init(&*host, "t", TIMEOUT_MS, None).await.expect("init");
        add_a(&c, &host, p).await.expect("add");
        let next = c
            .end(&host, "t", p, false, TxnProtocol::V2)
            .await
            .expect("end");
        assert_eq!(next, ProducerIdentity::new(p.id.0, p.epoch.0 + 1));
        let written = host.written_here.borrow().clone();
        assert_eq!(written[0].0.ends, MarkerEnds::BeforeItsEpoch);
        assert!(!written[0].0.commit);
        assert_eq!(state_of(&c, "t").state, TxnState::CompleteAbort);
        // The old epoch is fenced.
        assert_eq!(
            add_a(&c, &host, p).await,
            Err(ResponseError::ProducerFenced)
        );
    });
}

#[test]
fn markers_for_other_nodes_are_sent_after_the_answer() {
    with_coordinator(async |c, host| {
        let p = c.init(&*host, "t", TIMEOUT_MS, None).await.expect("init");
        let parts = partitions(&[("a", 0), ("remote", 1)]);
        c.add(&*host, "t", p, &parts, &[], EnrolWait::Durable)
            .await
            .expect("add");
        c.end(&host, "t", p, true, TxnProtocol::V1)
            .await
            .expect("end");
        // The task that writes the markers holds the id's lock until it is done.
        drop(c.states().lock("t").acquire().await);
        let sent = host.sent.borrow().clone();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].1[0].addr, format!("node-{THERE}"));
        assert_eq!(sent[0].1[0].partitions, partitions(&[("remote", 1)]));
        assert_eq!(
            host.written_here.borrow()[0].1,
            partitions(&[("a", 0)]),
            "this node's own partition is marked here, not over the wire"
        );
        assert_eq!(state_of(&c, "t").state, TxnState::CompleteCommit);
    });
}

#[test]
fn a_stale_epoch_cannot_end_a_transaction() {
    with_coordinator(async |c, host| {
        let old = c.init(&*host, "t", TIMEOUT_MS, None).await.expect("init");
        let p = c
            .init(&*host, "t", TIMEOUT_MS, None)
            .await
            .expect("re-init");
        add_a(&c, &host, p).await.expect("add");
        assert_eq!(
            c.end(&host, "t", old, true, TxnProtocol::V1).await,
            Err(ResponseError::ProducerFenced)
        );
        assert_eq!(state_of(&c, "t").state, TxnState::Ongoing);
        assert!(host.written_here.borrow().is_empty());
    });
}

#[test]
fn markers_that_fail_leave_the_prepare_state_for_housekeeping_to_finish() {
    with_coordinator(async |c, host| {
        let p = c.init(&*host, "t", TIMEOUT_MS, None).await.expect("init");
        add_a(&c, &host, p).await.expect("add");
        host.markers_fail.set(true);
        c.end(&host, "t", p, true, TxnProtocol::V1)
            .await
            .expect("answered once decided");
        assert_eq!(state_of(&c, "t").state, TxnState::PrepareCommit);
        // While it is unfinished, a new instance of the producer must wait.
        assert_eq!(
            c.init(&*host, "t", TIMEOUT_MS, None).await,
            Err(ResponseError::ConcurrentTransactions)
        );
        c.housekeeping(&*host).await;
        assert_eq!(state_of(&c, "t").state, TxnState::PrepareCommit);
        host.markers_fail.set(false);
        c.housekeeping(&*host).await;
        assert_eq!(state_of(&c, "t").state, TxnState::CompleteCommit);
        assert!(host.written_here.borrow().iter().all(|(m, _)| m.commit));
    });
}

#[test]
fn a_transaction_open_past_its_timeout_is_aborted_at_a_fencing_epoch() {
    with_coordinator(async |c, host| {
        let p = c.init(&*host, "t", 1_000, None).await.expect("init");
        add_a(&c, &host, p).await.expect("add");
        host.advance(Duration::from_millis(500));
        c.housekeeping(&*host).await;
        assert_eq!(state_of(&c, "t").state, TxnState::Ongoing, "not yet");
        host.advance(Duration::from_millis(600));
        c.housekeeping(&*host).await;
        let aborted = state_of(&c, "t");
        assert_eq!(aborted.state, TxnState::CompleteAbort);
        assert_eq!(
            aborted.producer_epoch,
            p.epoch.0 + 1,
            "the producer is fenced"
        );
        let (marker, _) = host.written_here.borrow()[0];
        assert!(!marker.commit);
        assert_eq!(marker.producer.epoch.0, p.epoch.0 + 1);
        assert_eq!(
            c.end(&host, "t", p, true, TxnProtocol::V1).await,
            Err(ResponseError::ProducerFenced)
        );
    });
}

#[test]
fn an_id_idle_past_its_expiration_is_forgotten_and_starts_afresh() {
    with_coordinator(async |c, host| {
        let p = c.init(&*host, "t", TIMEOUT_MS, None).await.expect("init");
        host.advance(LIMITS.id_expiration - Duration::from_secs(1));
        c.housekeeping(&*host).await;
        assert!(c.states().get("t").expect("read").is_some(), "not yet");
        host.advance(Duration::from_secs(2));
        c.housekeeping(&*host).await;
        assert_eq!(c.states().get("t").expect("read"), None);
        let again = c.init(&*host, "t", TIMEOUT_MS, None).await.expect("init");
        assert_ne!(again.id, p.id, "a forgotten id gets a new producer");
    });
}

#[test]
fn an_epoch_that_ran_out_gets_a_new_producer_id() {
    with_coordinator(async |c, host| {
        let p = c.init(&*host, "t", TIMEOUT_MS, None).await.expect("init");
        let mut worn = state_of(&c, "t");
        worn.producer_epoch = ProducerEpoch::MAX.0 - 1;
        c.states().persist("t", &worn, None).await.expect("seed");
        let last = ProducerIdentity::new(p.id.0, worn.producer_epoch);
        add_a(&c, &host, last).await.expect("add");
        let next = c
            .end(&host, "t", last, true, TxnProtocol::V2)
            .await
            .expect("end");
        assert_eq!(next, ProducerIdentity::new(101, 0), "a new id at epoch 0");
        // The markers carry the bumped epoch, the last the old id has.
        assert_eq!(
            host.written_here.borrow()[0].0.producer,
            ProducerIdentity::new(p.id.0, ProducerEpoch::MAX.0)
        );
    });
}

#[test]
fn init_refuses_a_timeout_beyond_the_limit() {
    with_coordinator(async |c, host| {
        let too_long = i32::try_from(LIMITS.timeout_max.as_millis()).expect("fits") + 1;
        assert_eq!(
            c.init(&*host, "t", too_long, None).await,
            Err(ResponseError::InvalidTransactionTimeout)
        );
    });
}

/// splitmix64, seeded, so a failing interleaving replays from the seed it prints.
struct Rng(u64);

impl Rng {
    fn from_env() -> Rng {
        let seed = std::env::var("WEIR_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        println!("coordinator interleavings: seed {seed} (rerun with WEIR_SEED={seed})");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// What the producers of one transactional id were handed, in order.
#[derive(Default)]
struct Handed {
    all: Vec<ProducerIdentity>,
}

impl Handed {
    fn latest(&self) -> Option<ProducerIdentity> {
        self.all.last().copied()
    }

    /// Records `p`; every identity an id hands out is newer than the ones before.
    fn push(&mut self, p: ProducerIdentity, seed_note: &str) {
        if let Some(last) = self.latest() {
            assert!(
                (p.id, p.epoch) >= (last.id, last.epoch),
                "{seed_note}: handed {p:?} after {last:?}"
            );
        }
        self.all.push(p);
    }
}

/// Random interleavings of InitProducerId, Add, End (V1 and V2, current and stale
/// producers), failing and recovering markers, time passing past the timeouts, and
/// housekeeping, with the markers of other nodes written by the tasks EndTxn leaves
/// behind running in between. Checked throughout: a stale producer changes nothing,
/// no transaction gets both a COMMIT and an ABORT marker, identities only move
/// forward; and at the end, once markers flow and housekeeping ran, nothing is left
/// open past its timeout or half-ended.
#[test]
fn random_interleavings_keep_the_coordinators_promises() {
    let mut rng = Rng::from_env();
    let seed = rng.0;
    with_coordinator(async move |c, host| {
        let note = format!("seed {seed}");
        let ids = ["a", "b", "c"];
        let protocol = |i: usize| {
            if i == 2 {
                TxnProtocol::V1
            } else {
                TxnProtocol::V2
            }
        };
        let mut handed: Vec<Handed> = ids.iter().map(|_| Handed::default()).collect();
        let all_parts = partitions(&[("a", 0), ("b", 1), ("remote", 2)]);
        for _ in 0..300 {
            let i = rng.below(ids.len() as u64) as usize;
            let id = ids[i];
            // A stale producer: one handed out before the latest.
            let stale = (handed[i].all.len() > 1)
                .then(|| handed[i].all[rng.below(handed[i].all.len() as u64 - 1) as usize]);
            let current = handed[i].latest();
            match rng.below(10) {
                0 | 1 => match c.init(&*host, id, 2_000, None).await {
                    Ok(p) => handed[i].push(p, &note),
                    Err(e) => assert_eq!(e, ResponseError::ConcurrentTransactions, "{note}"),
                },
                2..=4 => {
                    let (Some(p), use_stale) = (current, rng.below(4) == 0) else {
                        continue;
                    };
                    let p = if use_stale { stale.unwrap_or(p) } else { p };
                    let n = 1 + rng.below(all_parts.len() as u64) as usize;
                    // (Waits for a task still marking the id's last transaction.)
                    drop(c.states().lock(id).acquire().await);
                    let before = c.states().get(id).expect("read");
                    let added = c
                        .add(&*host, id, p, &all_parts[..n], &[], EnrolWait::Durable)
                        .await;
                    if Some(p) != current {
                        assert!(added.is_err(), "{note}: stale {p:?} added to {id}");
                        assert_eq!(c.states().get(id).expect("read"), before, "{note}");
                    }
                }
                5 | 6 => {
                    let (Some(p), use_stale) = (current, rng.below(4) == 0) else {
                        continue;
                    };
                    let p = if use_stale { stale.unwrap_or(p) } else { p };
                    let commit = rng.below(2) == 0;
                    drop(c.states().lock(id).acquire().await);
                    let before = c.states().get(id).expect("read");
                    let ended = c.end(&host, id, p, commit, protocol(i)).await;
                    if Some(p) != current {
                        // At most a V2 retry of the end just made, answered as it was.
                        let after = c.states().get(id).expect("read");
                        assert_eq!(after, before, "{note}: stale {p:?} changed {id}");
                    } else if let Ok(next) = ended {
                        if next != p {
                            handed[i].push(next, &note);
                        }
                    }
                }
                7 => host.markers_fail.set(rng.below(3) == 0),
                8 => host.advance(Duration::from_millis(rng.below(3_000))),
                _ => c.housekeeping(&*host).await,
            }
            // Let the tasks EndTxn left behind run.
            glommio::yield_if_needed().await;
            no_transaction_is_both_committed_and_aborted(&host, &handed[2], &note);
        }
        host.markers_fail.set(false);
        host.advance(Duration::from_secs(10));
        c.housekeeping(&*host).await;
        for id in ids {
            drop(c.states().lock(id).acquire().await);
        }
        c.housekeeping(&*host).await;
        no_transaction_is_both_committed_and_aborted(&host, &handed[2], &note);
        for id in ids {
            if let Some(meta) = c.states().get(id).expect("read") {
                assert!(
                    matches!(
                        meta.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    ),
                    "{note}: {id} left {:?}",
                    meta.state
                );
            }
        }
    });
}

/// Every marker of one producer id at one epoch, here or sent, says the same. In
/// transactions V2 an epoch ends one transaction; V1 keeps the epoch across them, so
/// the producers handed to the V1 id (`v1`) are left out.
fn no_transaction_is_both_committed_and_aborted(host: &FakeHost, v1: &Handed, note: &str) {
    let mut seen = std::collections::HashMap::new();
    let here = host.written_here.borrow();
    let sent = host.sent.borrow();
    let markers = here
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(m, _)| m)
        .chain(sent.iter().filter(|(_, t)| !t.is_empty()).map(|(m, _)| m));
    for m in markers.filter(|m| v1.all.iter().all(|p| p.id != m.producer.id)) {
        let first = *seen.entry(m.producer).or_insert(m.commit);
        assert_eq!(
            first, m.commit,
            "{note}: {:?} marked both committed and aborted",
            m.producer
        );
    }
}
