//! The follower's fetch loop against a mock leader: a real leader log behind a
//! scripted [`Leader`], the follower's real logs behind [`ReplicaLogs`], each case in
//! milliseconds — appending, cutting a diverged tail, starting again past a deleted
//! log start — without processes or sockets (Kafka's `MockLeaderEndPoint` idea).

use std::{cell::RefCell, path::PathBuf};

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use weir_client::record_batch::build_batch;

use super::*;
use crate::{
    replication::divergence,
    storage::{
        partition_log::cut_log,
        test_support::{run, start_storage, test_dir},
        LogConfig, ShardStorage,
    },
};

const TOPIC: &str = "t";

/// A leader answering from its own real log, as a leader shard does; it refuses once
/// it has answered `answers` fetches, which ends the follower's loop.
struct MockLeader {
    log: PartitionLog,
    answers: usize,
    asked: Vec<(i64, i32)>,
}

impl MockLeader {
    /// A leader serving `log` for `answers` fetches.
    fn new(log: &PartitionLog, answers: usize) -> MockLeader {
        MockLeader {
            log: log.clone(),
            answers,
            asked: Vec::new(),
        }
    }
}

impl Leader for MockLeader {
    async fn fetch(&mut self, request: &FetchRequest) -> Result<FetchResponse, ReplicaError> {
        if self.answers == 0 {
            return Err(ReplicaError::Timeout(Duration::ZERO));
        }
        self.answers -= 1;
        let asked = &request.topics[0].partitions[0];
        self.asked
            .push((asked.fetch_offset, asked.last_fetched_epoch));
        let mut part = PartitionData::default();
        part.partition_index = asked.partition;
        let offset = Offset(asked.fetch_offset.max(0) as u64);
        match divergence(&self.log, offset, asked.last_fetched_epoch) {
            Some(end) => {
                part.diverging_epoch.epoch = end.epoch;
                part.diverging_epoch.end_offset = end.end_offset.to_wire();
            }
            None => match self.log.read_replica(offset, 1 << 20).await {
                Ok(read) => {
                    part.records = Some(read.records);
                    part.high_watermark = read.high_watermark.to_wire();
                    part.log_start_offset = read.log_start_offset.to_wire();
                }
                Err(StorageError::OffsetOutOfRange { log_start, .. }) => {
                    part.error_code = ResponseError::OffsetOutOfRange.code();
                    part.log_start_offset = log_start.to_wire();
                }
                Err(e) => return Err(e.into()),
            },
        }
        let mut topic = FetchableTopicResponse::default();
        topic.topic = topic_name(TOPIC);
        topic.partitions.push(part);
        let mut response = FetchResponse::default();
        response.responses.push(topic);
        Ok(response)
    }
}

/// The follower's one replica log, opened, cut and reopened as a shard does.
struct Follower {
    storage: ShardStorage,
    dir: PathBuf,
    log: RefCell<Option<PartitionLog>>,
}

impl ReplicaLogs for Follower {
    fn node(&self) -> NodeId {
        2
    }

    async fn replica(&self, _topic: &str, _p: u32) -> Result<PartitionLog, PartitionError> {
        if let Some(log) = self.log.borrow().clone() {
            return Ok(log);
        }
        let (log, _) = self
            .storage
            .open_log(&self.dir, LogConfig::default())
            .await
            .map_err(|_| PartitionError::Storage)?;
        *self.log.borrow_mut() = Some(log.clone());
        Ok(log)
    }

    async fn cut(
        &self,
        topic: &str,
        p: u32,
        how: Truncation,
    ) -> Result<PartitionLog, PartitionError> {
        let log = self
            .log
            .borrow_mut()
            .take()
            .ok_or(PartitionError::Storage)?;
        log.close().await.map_err(|_| PartitionError::Storage)?;
        cut_log(&self.dir, how)
            .await
            .map_err(|_| PartitionError::Storage)?;
        self.replica(topic, p).await
    }
}

/// Appends `batches` batches of 2 records each to `log` as leader of `epoch`.
async fn lead(log: &PartitionLog, epoch: i32, batches: usize) {
    for _ in 0..batches {
        let payload =
            ProducePayload::validate(Bytes::from(build_batch(2, b"v", 0)), 1 << 20).expect("batch");
        let appended = log.append(&payload, epoch).await.expect("append");
        appended
            .durable
            .waiting_for(Wait::Local)
            .await
            .expect("durable");
    }
}

/// Runs the follower's loop from `follower` against `leader` until the leader stops
/// answering.
async fn follow(follower: &Follower, leader: &mut MockLeader) {
    let session = FetchSession::new(1);
    session.add((TOPIC.to_string(), 0), 5);
    let ended = replicate(follower, &session, leader).await;
    assert!(matches!(ended, Err(ReplicaError::Timeout(_))), "{ended:?}");
}

/// A leader log and a follower log in one fresh directory.
async fn pair(dir: &std::path::Path) -> (PartitionLog, Follower) {
    let storage = start_storage(dir).await;
    let (leader, _) = storage
        .open_log(&dir.join("leader-0"), LogConfig::default())
        .await
        .expect("open");
    let follower = Follower {
        storage,
        dir: dir.join("t-0"),
        log: RefCell::new(None),
    };
    (leader, follower)
}

#[test]
fn a_follower_appends_what_the_leader_has_and_follows_its_high_watermark() {
    run(async {
        let dir = test_dir();
        let (leader_log, follower) = pair(dir.path()).await;
        lead(&leader_log, 3, 3).await;
        let mut leader = MockLeader::new(&leader_log, 2);
        follow(&follower, &mut leader).await;
        let log = follower.replica(TOPIC, 0).await.expect("log");
        assert_eq!(log.log_end(), Offset(6));
        assert_eq!(log.high_watermark(), leader_log.high_watermark());
        assert_eq!(log.leader_epochs().latest(), Some(3));
        // The second fetch asks from where the first answer's records ended.
        assert_eq!(leader.asked, [(0, -1), (6, 3)]);
    });
}

#[test]
fn a_diverged_tail_is_cut_where_the_leaders_epoch_ended_and_refetched() {
    run(async {
        let dir = test_dir();
        let (leader_log, follower) = pair(dir.path()).await;
        // Both logs hold epoch 1's first 4 records; the follower, once a leader of
        // epoch 2, also wrote 4 records nobody else got; the leader moved on in epoch 3.
        lead(&leader_log, 1, 2).await;
        let mut leader = MockLeader::new(&leader_log, 1);
        follow(&follower, &mut leader).await;
        let mine = follower.replica(TOPIC, 0).await.expect("log");
        lead(&mine, 2, 2).await;
        assert_eq!(mine.log_end(), Offset(8));
        lead(&leader_log, 3, 1).await;

        leader.answers = 3;
        leader.asked.clear();
        follow(&follower, &mut leader).await;
        let log = follower.replica(TOPIC, 0).await.expect("log");
        assert_eq!(leader.asked[0], (8, 2), "asks from its own end and epoch");
        assert_eq!(leader.asked[1], (4, 1), "then from where epoch 1 ended");
        assert_eq!(log.log_end(), leader_log.log_end());
        assert_eq!(log.leader_epochs().latest(), Some(3));
        let ours = log.read_replica(Offset(4), 1 << 20).await.expect("read");
        let theirs = leader_log
            .read_replica(Offset(4), 1 << 20)
            .await
            .expect("read");
        assert_eq!(ours.records, theirs.records, "the tail is the leader's");
    });
}

#[test]
fn a_leader_whose_log_starts_past_the_followers_end_restarts_it_there() {
    run(async {
        let dir = test_dir();
        let (leader_log, follower) = pair(dir.path()).await;
        lead(&leader_log, 0, 5).await;
        leader_log
            .delete_records(Offset(8))
            .await
            .expect("delete records");
        let mut leader = MockLeader::new(&leader_log, 2);
        follow(&follower, &mut leader).await;
        let log = follower.replica(TOPIC, 0).await.expect("log");
        assert_eq!(leader.asked, [(0, -1), (8, -1)]);
        assert_eq!(log.log_start_offset(), Offset(8));
        assert_eq!(log.log_end(), Offset(10), "and then takes what follows");
    });
}
