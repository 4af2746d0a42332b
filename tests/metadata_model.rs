//! The controller's partition state machine under random sequences of host fencing and
//! return, restarts, drains (with and without moving replicas), ISR changes (current and stale)
//! and preferred-leader elections (`ClusterState::apply`, which every voter runs on the
//! same log): after every command, each partition's replicas sit on distinct hosts and
//! change only by a move starting (replicas added) or finishing (the target, once in
//! sync), its ISR is a non-empty set of its replicas, its leader is a live in-sync
//! replica, a new leader always comes from the previous ISR (no unclean election) with
//! a higher epoch, a partition is leaderless only while every in-sync replica's host is
//! fenced, and a refused command changes nothing.

use proptest::prelude::*;
use weir::metadata::{
    cluster_state::{ClusterState, Command, HostRecord},
    partition_state::PartitionState,
    topic_config::TopicConfigs,
};

const HOSTS: [u32; 4] = [1, 2, 3, 4];

fn host(id: u32) -> HostRecord {
    HostRecord {
        advertise: format!("127.0.0.{id}"),
        port: 9092,
        tls_port: None,
        shards: 2,
        incarnation: 1,
        fenced: false,
        draining: false,
    }
}

/// Four two-shard hosts and topics of 3, 2 and 1 replicas.
fn cluster() -> ClusterState {
    let mut s = ClusterState::default();
    for id in HOSTS {
        s.apply(Command::RegisterHost {
            host: id,
            record: host(id),
        })
        .expect("register");
    }
    for (name, rf) in [("three", 3), ("two", 2), ("one", 1)] {
        let t = s
            .new_topic(name, 4, rf, TopicConfigs::new(), 1)
            .expect("placed");
        s.apply(Command::CreateTopic(t)).expect("create");
    }
    s
}

#[derive(Debug, Clone)]
enum Op {
    Fence(u32, bool),
    /// Host, draining, moving its replicas.
    Drain(u32, bool, bool),
    /// A host registers again as a new process.
    Restart(u32),
    /// Topic index, partition, epoch offset from the current one (0 = current), ISR picks.
    AlterIsr(usize, u32, i32, Vec<bool>),
    Prefer,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u32..=4, any::<bool>()).prop_map(|(h, f)| Op::Fence(h, f)),
        (1u32..=4, any::<bool>(), any::<bool>()).prop_map(|(h, d, m)| Op::Drain(h, d, m)),
        (1u32..=4).prop_map(Op::Restart),
        (
            0usize..3,
            0u32..4,
            prop_oneof![Just(0), Just(-1), Just(1)],
            proptest::collection::vec(any::<bool>(), 4)
        )
            .prop_map(|(t, p, e, picks)| Op::AlterIsr(t, p, e, picks)),
        Just(Op::Prefer),
    ]
}

fn command(s: &ClusterState, op: &Op) -> Command {
    match op {
        Op::Fence(host, fenced) => Command::SetFenced {
            host: *host,
            fenced: *fenced,
        },
        Op::Drain(host, draining, reassign) => Command::SetDraining {
            host: *host,
            draining: *draining,
            reassign: *reassign,
        },
        Op::Restart(h) => {
            let mut record = s.hosts[h].clone();
            record.incarnation += 1;
            record.fenced = false;
            Command::RegisterHost { host: *h, record }
        }
        Op::AlterIsr(t, p, offset, picks) => {
            let name = ["three", "two", "one"][*t];
            let state = &s.topics[name].states[*p as usize];
            let isr = state
                .replicas
                .iter()
                .zip(picks)
                .filter(|(_, keep)| **keep)
                .map(|(n, _)| *n)
                .chain(state.leader)
                .collect();
            Command::AlterIsr {
                topic: name.into(),
                partition: *p,
                leader_epoch: state.leader_epoch + offset,
                isr,
            }
        }
        Op::Prefer => Command::PreferLeaders,
    }
}

fn fenced(s: &ClusterState, node: i32) -> bool {
    s.hosts[&(node as u32 / 1024)].fenced
}

fn check(
    before: &PartitionState,
    after: &PartitionState,
    s: &ClusterState,
) -> Result<(), TestCaseError> {
    let mut hosts: Vec<i32> = after.replicas.iter().map(|n| n / 1024).collect();
    hosts.sort_unstable();
    hosts.dedup();
    prop_assert_eq!(hosts.len(), after.replicas.len(), "two replicas on a host");
    if after.replicas != before.replicas {
        let started = after.target.is_some()
            && before.target.is_none()
            && before.replicas.iter().all(|n| after.replicas.contains(n));
        let finished = before.target.as_ref() == Some(&after.replicas)
            && after
                .replicas
                .iter()
                .all(|n| before.isr.contains(n) || after.isr.contains(n));
        prop_assert!(
            started || finished,
            "replicas moved outside a move: {:?} -> {:?}",
            before,
            after
        );
    }
    if let Some(target) = &after.target {
        prop_assert!(target.iter().all(|n| after.replicas.contains(n)));
    }
    prop_assert!(!after.isr.is_empty(), "an empty ISR: {:?}", after);
    prop_assert!(after.isr.iter().all(|n| after.replicas.contains(n)));
    let mut unique = after.isr.clone();
    unique.dedup();
    prop_assert_eq!(unique.len(), after.isr.len());
    prop_assert!(
        after.leader_epoch >= before.leader_epoch,
        "epochs only grow"
    );
    if after.leader != before.leader {
        prop_assert!(
            after.leader_epoch > before.leader_epoch,
            "a new leader, a new epoch"
        );
        // (A move that finishes as its last replica joins the ISR may hand over to it:
        // the leader vouched for it in that same change.)
        let vouched =
            |l: &i32| before.target.is_some() && after.target.is_none() && after.isr.contains(l);
        if let Some(l) = after.leader {
            prop_assert!(
                before.isr.contains(&l) || vouched(&l),
                "unclean election: {:?} -> {:?}",
                before,
                after
            );
        }
    }
    match after.leader {
        Some(l) => {
            prop_assert!(after.isr.contains(&l), "the leader is in sync: {:?}", after);
            prop_assert!(!fenced(s, l), "a fenced leader: {:?}", after);
        }
        None => prop_assert!(
            after.isr.iter().all(|n| fenced(s, *n)),
            "leaderless while an in-sync replica lives: {:?}",
            after
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn elections_stay_clean_under_any_sequence(ops in proptest::collection::vec(op(), 1..60)) {
        let mut s = cluster();
        for op in &ops {
            let before = s.clone();
            let cmd = command(&s, op);
            if s.apply(cmd).is_err() {
                prop_assert_eq!(&s, &before, "a refused command changed the state");
                continue;
            }
            for (name, t) in &s.topics {
                for (p, after) in t.states.iter().enumerate() {
                    check(&before.topics[name].states[p], after, &s)?;
                    if let Op::Restart(h) = op {
                        // A restarted host leads only what nobody else kept in sync.
                        let on_host = |n: &i32| n / 1024 == *h as i32;
                        if after.leader.is_some_and(|l| on_host(&l)) {
                            prop_assert!(after.isr.iter().all(on_host), "restarted into leadership: {:?}", after);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn unclean_election_happens_only_where_a_topic_allows_it() {
    let mut s = cluster();
    // "one" has one replica per partition: fencing its host leaves it leaderless. Take
    // a two-replica partition whose follower fell behind instead.
    let state = s.topics["two"].states[0].clone();
    let (leader, follower) = (state.replicas[0], state.replicas[1]);
    s.apply(Command::AlterIsr {
        topic: "two".into(),
        partition: 0,
        leader_epoch: state.leader_epoch,
        isr: vec![leader],
    })
    .expect("follower out of sync");
    s.apply(Command::SetFenced {
        host: leader as u32 / 1024,
        fenced: true,
    })
    .expect("fence the leader's host");
    assert_eq!(
        s.topics["two"].states[0].leader, None,
        "no unclean election"
    );
    let expected = s.topics["two"].configs.clone();
    let mut configs = expected.clone();
    configs.insert("unclean.leader.election.enable".into(), "true".into());
    s.apply(Command::SetConfigs {
        name: "two".into(),
        expected,
        configs,
    })
    .expect("allow it");
    let after = &s.topics["two"].states[0];
    assert_eq!(after.leader, Some(follower), "the live replica leads");
    assert_eq!(after.isr, [follower]);
    assert!(after.leader_epoch > state.leader_epoch);
}
