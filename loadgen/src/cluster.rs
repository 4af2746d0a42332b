//! Set-up calls: find the topic's partitions and their leaders (creating the topic if it
//! is missing) and the offsets consumers start from.

use std::{collections::BTreeMap, time::Duration};

use kafka_protocol::{
    messages::{
        create_topics_request::CreatableTopic,
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        metadata_request::MetadataRequestTopic,
        BrokerId, CreateTopicsRequest, ListOffsetsRequest, MetadataRequest, TopicName,
    },
    protocol::StrBytes,
    ResponseError,
};

use crate::wire::{self, WireError};

const METADATA_VERSION: i16 = 4;
const CREATE_TOPICS_VERSION: i16 = 4;
const LIST_OFFSETS_VERSION: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const TOPIC_ALREADY_EXISTS: i16 = 36;

/// Why set-up failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A connection failed.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The broker answered with an error.
    #[error("{what}: {code:?}")]
    Kafka {
        /// The call.
        what: String,
        /// Kafka's error.
        code: ResponseError,
    },
    /// The topic did not get leaders for every partition in time.
    #[error("topic {0} has partitions without a leader after 10 s")]
    NoLeader(String),
    /// Group metadata (subscription or assignment) could not be encoded or decoded.
    #[error("{0}")]
    Protocol(String),
}

/// The topic as the cluster reports it.
#[derive(Debug, Clone)]
pub struct Topology {
    /// The topic's name.
    pub topic: String,
    /// Partition index → address (`host:port`) of its leader, for every partition.
    pub leaders: BTreeMap<i32, String>,
}

/// `Err` with Kafka's error when `code` is one, for the call named `what`.
pub fn check(what: &str, code: i16) -> Result<(), ClusterError> {
    kafka_error(what, code).map_or(Ok(()), Err)
}

fn kafka_error(what: impl Into<String>, code: i16) -> Option<ClusterError> {
    ResponseError::try_from_code(code).map(|code| ClusterError::Kafka {
        what: what.into(),
        code,
    })
}

/// Asks `bootstrap` for `topic`, creating it with `partitions` partitions if it does not
/// exist, and waits until every partition has a leader.
pub async fn discover(
    bootstrap: &str,
    topic: &str,
    partitions: u32,
) -> Result<Topology, ClusterError> {
    let (mut writer, mut reader) = wire::connect(bootstrap).await?;
    let name = TopicName(StrBytes::from_string(topic.to_string()));
    let mut created = false;
    for _ in 0..100 {
        let mut request = MetadataRequest::default();
        request.topics = Some(vec![
            MetadataRequestTopic::default().with_name(Some(name.clone()))
        ]);
        request.allow_auto_topic_creation = false;
        let response = wire::call(&mut writer, &mut reader, &request, METADATA_VERSION).await?;
        let brokers: BTreeMap<BrokerId, String> = response
            .brokers
            .iter()
            .map(|b| (b.node_id, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        let Some(found) = response
            .topics
            .iter()
            .find(|t| t.name.as_ref() == Some(&name))
        else {
            return Err(ClusterError::NoLeader(topic.to_string()));
        };
        if found.error_code == UNKNOWN_TOPIC_OR_PARTITION && !created {
            create(&mut writer, &mut reader, &name, partitions).await?;
            created = true;
            continue;
        }
        if found.error_code != UNKNOWN_TOPIC_OR_PARTITION {
            if let Some(error) = kafka_error(format!("metadata for {topic}"), found.error_code) {
                return Err(error);
            }
            let leaders: BTreeMap<i32, String> = found
                .partitions
                .iter()
                .filter_map(|p| Some((p.partition_index, brokers.get(&p.leader_id)?.clone())))
                .collect();
            if !leaders.is_empty() && leaders.len() == found.partitions.len() {
                return Ok(Topology {
                    topic: topic.to_string(),
                    leaders,
                });
            }
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    Err(ClusterError::NoLeader(topic.to_string()))
}

async fn create(
    writer: &mut wire::RequestWriter,
    reader: &mut wire::ResponseReader,
    name: &TopicName,
    partitions: u32,
) -> Result<(), ClusterError> {
    let mut request = CreateTopicsRequest::default();
    request.timeout_ms = 10_000;
    request.topics = vec![CreatableTopic::default()
        .with_name(name.clone())
        .with_num_partitions(partitions as i32)
        .with_replication_factor(1)];
    let response = wire::call(writer, reader, &request, CREATE_TOPICS_VERSION).await?;
    for result in &response.topics {
        if result.error_code != TOPIC_ALREADY_EXISTS {
            if let Some(error) = kafka_error(
                format!("creating topic {}", name.as_str()),
                result.error_code,
            ) {
                return Err(error);
            }
        }
    }
    Ok(())
}

/// The offset each partition's log ends at (`latest`) or starts at (`!latest`), asked of
/// each partition's leader.
pub async fn offsets(
    topology: &Topology,
    latest: bool,
) -> Result<BTreeMap<i32, i64>, ClusterError> {
    let mut by_leader: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (&partition, leader) in &topology.leaders {
        by_leader.entry(leader).or_default().push(partition);
    }
    let name = TopicName(StrBytes::from_string(topology.topic.clone()));
    let mut offsets = BTreeMap::new();
    for (leader, partitions) in by_leader {
        let (mut writer, mut reader) = wire::connect(leader).await?;
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(-1);
        request.topics = vec![ListOffsetsTopic::default()
            .with_name(name.clone())
            .with_partitions(
                partitions
                    .iter()
                    .map(|&p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_timestamp(if latest { -1 } else { -2 })
                    })
                    .collect(),
            )];
        let response = wire::call(&mut writer, &mut reader, &request, LIST_OFFSETS_VERSION).await?;
        for partition in response.topics.iter().flat_map(|t| &t.partitions) {
            if let Some(error) = kafka_error(
                format!(
                    "offsets of {}/{}",
                    topology.topic, partition.partition_index
                ),
                partition.error_code,
            ) {
                return Err(error);
            }
            offsets.insert(partition.partition_index, partition.offset);
        }
    }
    Ok(offsets)
}
