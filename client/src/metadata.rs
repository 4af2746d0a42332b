//! Finding a topic's partitions and their leaders (creating the topic if it is missing)
//! and the offsets each partition's log starts or ends at.

use std::{collections::BTreeMap, time::Duration};

use kafka_protocol::{
    messages::{
        create_topics_request::CreatableTopic,
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        metadata_request::MetadataRequestTopic,
        BrokerId, CreateTopicsRequest, ListOffsetsRequest, MetadataRequest, TopicName,
    },
    ResponseError,
};

use crate::{
    connection::{self, RequestWriter, ResponseReader},
    dialer::Dialer,
    names::topic_name,
    ClientError, Result,
};

const METADATA_VERSION: i16 = 4;
const CREATE_TOPICS_VERSION: i16 = 4;
const LIST_OFFSETS_VERSION: i16 = 2;
/// How often discovery asks before it gives up on partitions without a leader.
const ATTEMPTS_MAX: u32 = 100;
const ATTEMPT_PAUSE: Duration = Duration::from_millis(100);

/// A topic as the cluster reports it.
#[derive(Debug, Clone)]
pub struct Topology {
    /// The topic's name.
    pub topic: String,
    /// Partition index → address (`host:port`) of its leader, for every partition.
    pub leaders: BTreeMap<i32, String>,
}

/// Asks `bootstrap` for `topic`, creating it with `partitions` partitions if it does not
/// exist, and waits (up to 10 s) until every partition has a leader.
pub async fn discover(
    dialer: &Dialer,
    bootstrap: &str,
    topic: &str,
    partitions: u32,
    client_id: &'static str,
) -> Result<Topology> {
    let (mut writer, mut reader) = connection::connect_with(dialer, bootstrap, client_id).await?;
    let name = topic_name(topic);
    let mut created = false;
    for _ in 0..ATTEMPTS_MAX {
        let mut request = MetadataRequest::default();
        request.topics = Some(vec![
            MetadataRequestTopic::default().with_name(Some(name.clone()))
        ]);
        request.allow_auto_topic_creation = false;
        let response =
            connection::call(&mut writer, &mut reader, &request, METADATA_VERSION).await?;
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
            return Err(ClientError::NoLeader(topic.to_string()));
        };
        let unknown = found.error_code == ResponseError::UnknownTopicOrPartition.code();
        if unknown && !created {
            create(&mut writer, &mut reader, &name, partitions).await?;
            created = true;
            continue;
        }
        if !unknown {
            ClientError::check(format!("metadata for {topic}"), found.error_code)?;
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
        glommio::timer::sleep(ATTEMPT_PAUSE).await;
    }
    Err(ClientError::NoLeader(topic.to_string()))
}

async fn create(
    writer: &mut RequestWriter,
    reader: &mut ResponseReader,
    name: &TopicName,
    partitions: u32,
) -> Result<()> {
    let mut request = CreateTopicsRequest::default();
    request.timeout_ms = 10_000;
    request.topics = vec![CreatableTopic::default()
        .with_name(name.clone())
        .with_num_partitions(partitions as i32)
        .with_replication_factor(1)];
    let response = connection::call(writer, reader, &request, CREATE_TOPICS_VERSION).await?;
    for result in &response.topics {
        if result.error_code != ResponseError::TopicAlreadyExists.code() {
            ClientError::check(
                format!("creating topic {}", name.as_str()),
                result.error_code,
            )?;
        }
    }
    Ok(())
}

/// The offset each partition's log ends at (`latest`) or starts at (`!latest`), asked of
/// each partition's leader. A leader that is not ready yet (Kafka names a new topic's
/// leaders in metadata a moment before they answer for it) is asked again, every
/// `ATTEMPT_PAUSE` for up to `ATTEMPTS_MAX` times, as Kafka's clients retry.
pub async fn offsets(
    dialer: &Dialer,
    topology: &Topology,
    latest: bool,
    client_id: &'static str,
) -> Result<BTreeMap<i32, i64>> {
    let mut attempt = 1;
    loop {
        match offsets_once(dialer, topology, latest, client_id).await {
            Err(ClientError::Kafka { code, .. })
                if attempt < ATTEMPTS_MAX
                    && [
                        ResponseError::NotLeaderOrFollower,
                        ResponseError::LeaderNotAvailable,
                        ResponseError::UnknownTopicOrPartition,
                    ]
                    .contains(&code) =>
            {
                attempt += 1;
                glommio::timer::sleep(ATTEMPT_PAUSE).await;
            }
            result => return result,
        }
    }
}

async fn offsets_once(
    dialer: &Dialer,
    topology: &Topology,
    latest: bool,
    client_id: &'static str,
) -> Result<BTreeMap<i32, i64>> {
    let mut by_leader: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (&partition, leader) in &topology.leaders {
        by_leader.entry(leader).or_default().push(partition);
    }
    let name = topic_name(&topology.topic);
    let mut offsets = BTreeMap::new();
    for (leader, partitions) in by_leader {
        let (mut writer, mut reader) = connection::connect_with(dialer, leader, client_id).await?;
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
        let response =
            connection::call(&mut writer, &mut reader, &request, LIST_OFFSETS_VERSION).await?;
        for partition in response.topics.iter().flat_map(|t| &t.partitions) {
            ClientError::check(
                format!(
                    "offsets of {}/{}",
                    topology.topic, partition.partition_index
                ),
                partition.error_code,
            )?;
            offsets.insert(partition.partition_index, partition.offset);
        }
    }
    Ok(offsets)
}
