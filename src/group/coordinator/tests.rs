//! The coordinator driven through joins, syncs, heartbeats, commits and expiry.

use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::group::{
    offset_store::{Fence, PendingTxn},
    state::{JoinRequest, JoinResult},
};
use crate::storage::test_support::{run, test_dir};

fn join_req(member_id: &str) -> JoinRequest {
    JoinRequest {
        group: "g".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: "test".into(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(5),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        require_known_member_id: true,
    }
}

fn offset(o: i64) -> Vec<OffsetToCommit> {
    vec![(
        "t".into(),
        0,
        CommittedOffset {
            offset: o,
            leader_epoch: -1,
            generation: 0,
            committed_at_ms: 0,
            metadata: String::new(),
        },
    )]
}

/// Offset `o` of "t"-0, committed to `store` directly by a member of `generation`.
fn commit_stored(store: &OffsetStore, o: i64, generation: i32) {
    let mut committed = offset(o);
    committed[0].2.generation = generation;
    let refs: Vec<(&str, u32, CommittedOffset)> = committed
        .iter()
        .map(|(t, p, c)| (t.as_str(), *p, c.clone()))
        .collect();
    store
        .commit("g", Fence::Generation(generation), &refs)
        .expect("commit");
}

/// Joins a new member: MEMBER_ID_REQUIRED, then the real join.
async fn join_new(c: &Rc<Coordinator>) -> JoinResult {
    let first = c.join(join_req("")).await;
    assert_eq!(first.error, Some(ResponseError::MemberIdRequired));
    c.join(join_req(&first.member_id)).await
}

#[test]
fn members_join_sync_and_older_generations_cannot_commit() {
    let dir = test_dir();
    run(async move {
        let store = Arc::new(OffsetStore::open(dir.path(), 1 << 20).expect("store"));
        let c = Coordinator::new(Arc::clone(&store));
        let a = join_new(&c).await;
        assert_eq!(
            (a.error, a.generation, a.leader.as_str()),
            (None, 1, a.member_id.as_str())
        );
        assert_eq!(a.members.len(), 1, "the leader gets the member list");
        let s = c
            .sync(
                "g",
                1,
                &a.member_id,
                None,
                vec![(a.member_id.clone(), Bytes::from_static(b"all"))],
            )
            .await;
        assert_eq!((s.error, &s.assignment[..]), (None, &b"all"[..]));
        assert_eq!(c.describe("g").map(|d| d.0), Some(GroupState::Stable));
        assert_eq!(
            c.commit("g", 1, &a.member_id, None, offset(10), None).await,
            vec![Ok(())]
        );

        // b joins: a must rejoin; until it does, a's heartbeat says rebalance.
        let c2 = Rc::clone(&c);
        let b_join = glommio::spawn_local(async move { join_new(&c2).await });
        glommio::timer::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            c.heartbeat("g", 1, &a.member_id, None),
            Err(ResponseError::RebalanceInProgress)
        );
        assert_eq!(
            c.commit("g", 1, &a.member_id, None, offset(20), None).await,
            vec![Ok(())],
            "a member commits what it processed before it rejoins, as with Kafka"
        );
        let a2 = c.join(join_req(&a.member_id)).await;
        let b = b_join.await;
        assert_eq!((a2.generation, b.generation), (2, 2));
        assert_eq!(
            c.commit("g", 2, &a.member_id, None, offset(25), None).await,
            vec![Err(ResponseError::RebalanceInProgress)],
            "no commits between the join and the new assignment"
        );
        assert_eq!(
            c.commit("g", 1, &a.member_id, None, offset(30), None).await,
            vec![Err(ResponseError::IllegalGeneration)],
            "generation 1 is fenced"
        );
        assert_eq!(
            store.fetch("g", "t", 0).expect("fetch").map(|o| o.offset),
            Some(20)
        );
        assert_eq!(
            c.commit("g", -1, "", None, offset(0), None).await,
            vec![Err(ResponseError::UnknownMemberId)],
            "no resets while the group has members"
        );
    });
}

#[test]
fn silent_members_expire_and_an_empty_group_accepts_resets() {
    let dir = test_dir();
    run(async move {
        let store = Arc::new(OffsetStore::open(dir.path(), 1 << 20).expect("store"));
        let c = Coordinator::new(Arc::clone(&store));
        let a = join_new(&c).await;
        c.sync("g", 1, &a.member_id, None, vec![]).await;
        assert_eq!(
            c.commit("g", 1, &a.member_id, None, offset(50), None).await,
            vec![Ok(())]
        );
        c.expire(Instant::now() + Duration::from_secs(11));
        assert_eq!(
            c.describe("g").map(|d| (d.0, d.2)),
            Some((GroupState::Empty, 0))
        );
        assert_eq!(
            c.heartbeat("g", 1, &a.member_id, None),
            Err(ResponseError::UnknownMemberId)
        );
        assert_eq!(
            c.commit("g", -1, "", None, offset(5), None).await,
            vec![Ok(())],
            "reset of an empty group"
        );
        assert_eq!(
            store.fetch("g", "t", 0).expect("fetch").map(|o| o.offset),
            Some(5)
        );
    });
}

#[test]
fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let dir = test_dir();
    run(async move {
        let store = Arc::new(OffsetStore::open(dir.path(), 1 << 20).expect("store"));
        let c = Coordinator::new(store);
        let a = join_new(&c).await;
        c.sync("g", 1, &a.member_id, None, vec![]).await;
        let c2 = Rc::clone(&c);
        let b_join = glommio::spawn_local(async move { join_new(&c2).await });
        glommio::timer::sleep(Duration::from_millis(10)).await;
        // Past the 5 s rebalance timeout, within the 10 s sessions.
        c.expire(Instant::now() + Duration::from_secs(6));
        let b = b_join.await;
        assert_eq!(
            (b.error, b.generation, b.leader.clone()),
            (None, 2, b.member_id.clone())
        );
        assert_eq!(c.describe("g").map(|d| d.2), Some(1), "a was dropped");
    });
}

#[test]
fn a_restarted_static_member_keeps_its_assignment_without_a_rebalance() {
    let dir = test_dir();
    run(async move {
        let store = Arc::new(OffsetStore::open(dir.path(), 1 << 20).expect("store"));
        let c = Coordinator::new(store);
        let a = join_new(&c).await;
        let c2 = Rc::clone(&c);
        let b_join = glommio::spawn_local(async move {
            let mut req = join_req("");
            req.group_instance_id = Some("worker-b".into());
            c2.join(req).await
        });
        glommio::timer::sleep(Duration::from_millis(10)).await;
        let a2 = c.join(join_req(&a.member_id)).await;
        let b = b_join.await;
        assert_eq!(
            (a2.generation, b.generation, b.error),
            (2, 2, None),
            "static members need no MEMBER_ID_REQUIRED"
        );
        let assignments = vec![
            (a.member_id.clone(), Bytes::from_static(b"a-part")),
            (b.member_id.clone(), Bytes::from_static(b"b-part")),
        ];
        let c3 = Rc::clone(&c);
        let b_id = b.member_id.clone();
        let b_sync =
            glommio::spawn_local(
                async move { c3.sync("g", 2, &b_id, Some("worker-b"), vec![]).await },
            );
        c.sync("g", 2, &a.member_id, None, assignments).await;
        assert_eq!(&b_sync.await.assignment[..], b"b-part");

        // b restarts with the same instance id and no member id.
        let mut again = join_req("");
        again.group_instance_id = Some("worker-b".into());
        let b2 = c.join(again).await;
        assert_eq!(
            (b2.error, b2.generation),
            (None, 2),
            "same generation: no rebalance"
        );
        assert_ne!(b2.member_id, b.member_id);
        assert_eq!(c.describe("g").map(|d| d.0), Some(GroupState::Stable));
        assert_eq!(
            c.heartbeat("g", 2, &b.member_id, Some("worker-b")),
            Err(ResponseError::FencedInstanceId),
            "the old incarnation is fenced"
        );
        let s = c
            .sync("g", 2, &b2.member_id, Some("worker-b"), vec![])
            .await;
        assert_eq!(
            (s.error, &s.assignment[..]),
            (None, &b"b-part"[..]),
            "the assignment is kept"
        );
        assert_eq!(
            c.heartbeat("g", 2, &a.member_id, None),
            Ok(()),
            "a saw no rebalance"
        );
    });
}

#[test]
fn offsets_of_a_consumed_topic_cannot_be_deleted_the_others_can() {
    use kafka_protocol::{messages::ConsumerProtocolSubscription, protocol::Encodable};
    let dir = test_dir();
    run(async move {
        let store = Arc::new(OffsetStore::open(dir.path(), 1 << 20).expect("store"));
        let c = Coordinator::new(Arc::clone(&store));
        let mut subscription = ConsumerProtocolSubscription::default();
        subscription.topics = vec![kafka_protocol::protocol::StrBytes::from_static_str("t")];
        let mut meta = bytes::BytesMut::from(&1i16.to_be_bytes()[..]);
        subscription.encode(&mut meta, 1).expect("encode");
        let mut req = join_req("");
        req.protocols = vec![("range".into(), meta.freeze())];
        let first = c.join(req.clone()).await;
        req.member_id = first.member_id;
        let a = c.join(req).await;
        c.sync("g", 1, &a.member_id, None, vec![]).await;
        let mut both = offset(10);
        both.push(("u".into(), 0, offset(20).remove(0).2));
        assert_eq!(
            c.commit("g", 1, &a.member_id, None, both, None).await,
            vec![Ok(()), Ok(())]
        );
        let asked = vec![("t".to_string(), 0), ("u".to_string(), 0)];
        assert_eq!(
            c.delete_offsets("g", asked.clone(), None).await,
            Ok(vec![Err(ResponseError::GroupSubscribedToTopic), Ok(())])
        );
        assert_eq!(store.fetch("g", "u", 0).expect("fetch"), None);
        assert!(store.fetch("g", "t", 0).expect("fetch").is_some());
        // Once the member leaves, nothing is consumed any more.
        assert_eq!(
            c.leave("g", std::slice::from_ref(&a.member_id)),
            vec![Ok(())]
        );
        assert_eq!(
            c.delete_offsets("g", asked, None).await,
            Ok(vec![Ok(()), Ok(())])
        );
        assert_eq!(store.fetch("g", "t", 0).expect("fetch"), None);
        assert_eq!(
            c.delete_offsets("nobody", vec![("t".into(), 0)], None)
                .await,
            Err(ResponseError::GroupIdNotFound)
        );
    });
}

#[test]
fn a_new_coordinator_continues_the_generations_of_the_groups_offsets() {
    let dir = test_dir();
    run(async move {
        let store = Arc::new(OffsetStore::open(dir.path(), 1 << 20).expect("store"));
        commit_stored(&store, 40, 6);
        // A coordinator that never saw the group (a restart, or the group's journal
        // partition moved here): its first generation comes after the stored one, so
        // its members' commits are not fenced out.
        let c = Coordinator::new(Arc::clone(&store));
        let a = join_new(&c).await;
        assert_eq!(a.generation, 7);
        c.sync("g", 7, &a.member_id, None, Vec::new()).await;
        assert_eq!(
            c.commit("g", 7, &a.member_id, None, offset(41), None).await,
            vec![Ok(())]
        );
        assert_eq!(
            store.fetch("g", "t", 0).expect("fetch").map(|c| c.offset),
            Some(41)
        );
    });
}

#[test]
fn a_new_coordinator_continues_after_the_generation_of_offsets_pending_in_a_transaction() {
    let dir = test_dir();
    run(async move {
        let store = Arc::new(OffsetStore::open(dir.path(), 1 << 20).expect("store"));
        commit_stored(&store, 40, 6);
        // Two rebalances later a member of generation 8 committed offset 50 inside a
        // transaction; its coordinator died before the marker came.
        let mut pending = offset(50);
        pending[0].2.generation = 8;
        store
            .add_pending(
                "g",
                PendingTxn {
                    producer_id: 7,
                    producer_epoch: 0,
                    v2: false,
                },
                Fence::Generation(8),
                &pending,
            )
            .expect("pending");
        let c = Coordinator::new(Arc::clone(&store));
        let a = join_new(&c).await;
        assert_eq!(
            a.generation, 9,
            "after the pending generation, not the committed one"
        );
        c.sync("g", 9, &a.member_id, None, Vec::new()).await;
        // The transaction commits here, then the new generation's member commits on:
        // its offsets must move, not stay fenced behind generation 8's.
        c.end_pending("g", crate::ids::ProducerIdentity::new(7, 0), true, None)
            .await
            .expect("marker");
        assert_eq!(
            c.commit("g", 9, &a.member_id, None, offset(60), None).await,
            vec![Ok(())]
        );
        assert_eq!(
            store.fetch("g", "t", 0).expect("fetch").map(|c| c.offset),
            Some(60)
        );
    });
}

#[test]
fn a_group_that_moves_away_answers_its_waiting_members_not_coordinator() {
    let dir = test_dir();
    run(async move {
        let store = Arc::new(OffsetStore::open(dir.path(), 1 << 20).expect("store"));
        let c = Coordinator::new(Arc::clone(&store));
        let a = join_new(&c).await;
        c.sync("g", 1, &a.member_id, None, vec![]).await;
        // b's join waits for a to rejoin (up to the 5 s rebalance timeout) when the
        // group's coordinator moves to another shard.
        let c2 = Rc::clone(&c);
        let b_join = glommio::spawn_local(async move { join_new(&c2).await });
        glommio::timer::sleep(Duration::from_millis(10)).await;
        assert_eq!(c.evict(|g| g != "g"), ["g"]);
        let started = Instant::now();
        let b = b_join.await;
        assert_eq!(b.error, Some(ResponseError::NotCoordinator));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "answered at once"
        );
        assert!(c.describe("g").is_none(), "nothing stale left here");
        assert!(c.evict(|_| false).is_empty());
    });
}

#[test]
fn marker_epochs_fence_older_epochs_until_the_producer_is_forgotten() {
    let dir = test_dir();
    let store = Arc::new(OffsetStore::open(dir.path(), 1 << 20).expect("store"));
    let c = Coordinator::new(store);
    c.note_marker(crate::ids::ProducerIdentity::new(7, 3));
    c.note_marker(crate::ids::ProducerIdentity::new(7, 2));
    assert!(
        c.ended_before(7, 2),
        "a marker of epoch 3 ended epoch 2's transaction"
    );
    assert!(
        !c.ended_before(7, 3),
        "the same epoch is not ended (V2's next transaction)"
    );
    assert!(!c.ended_before(8, 0), "another producer");
    assert_eq!(c.forget_marker_epochs(Duration::from_secs(3600)), 0);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(c.forget_marker_epochs(Duration::from_millis(1)), 1);
    assert!(!c.ended_before(7, 2), "forgotten with the producer");
}
