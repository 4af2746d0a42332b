//! The admin session and its topic commands. Each returns the text to print, or an
//! error naming what failed with Kafka's error name.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::{
    messages::{
        create_partitions_request::CreatePartitionsTopic,
        create_topics_request::{CreatableTopic, CreatableTopicConfig},
        delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic},
        describe_configs_request::DescribeConfigsResource,
        incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        metadata_request::MetadataRequestTopic,
        BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest,
        DeleteTopicsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
        ListOffsetsRequest, MetadataRequest, MetadataResponse, TopicName,
    },
    protocol::StrBytes,
    ResponseError,
};

use weir_client::{blocking::Connection, sasl::SaslLogin, ClientError};

/// Kafka's resource type for topics.
const TOPIC_RESOURCE: i8 = 2;
/// Kafka's config source for a topic's own override.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;

/// The client id the admin commands' requests carry.
const CLIENT_ID: &str = "weir-admin";

/// Why an admin command failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// Talking to the broker failed.
    #[error(transparent)]
    Wire(#[from] ClientError),
    /// The broker answered with an error.
    #[error("{what}: {error}")]
    Kafka {
        /// What was attempted.
        what: String,
        /// Kafka's error.
        error: String,
        /// Its code.
        code: i16,
    },
    /// The command refused to act.
    #[error("{0}")]
    Refused(String),
}

pub(super) type Result<T> = std::result::Result<T, AdminError>;

pub(super) fn check(code: i16, what: impl Into<String>) -> Result<()> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(e) => Err(AdminError::Kafka {
            what: what.into(),
            error: format!("{e:?} ({code})"),
            code,
        }),
    }
}

/// How long a command keeps asking while the coordinator answers that it is not the
/// coordinator yet or still loading, as Kafka's admin client retries these until its
/// `default.api.timeout.ms`.
const COORDINATOR_RETRY_WINDOW: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `call` again, 100 ms apart and for up to [`COORDINATOR_RETRY_WINDOW`], while the
/// coordinator answers that it is not the coordinator yet or still loading: in a
/// cluster, the shard a group was just given learns so within milliseconds, but a
/// journal partition whose leadership is still settling (a cluster that has just
/// started, a host just lost) takes seconds.
pub(super) fn with_coordinator_retries<T>(mut call: impl FnMut() -> Result<T>) -> Result<T> {
    let retriable = [
        ResponseError::NotCoordinator.code(),
        ResponseError::CoordinatorLoadInProgress.code(),
    ];
    let deadline = std::time::Instant::now() + COORDINATOR_RETRY_WINDOW;
    loop {
        match call() {
            Err(AdminError::Kafka { code, .. })
                if retriable.contains(&code) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

pub(super) fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Where `reset-offsets` moves a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTarget {
    /// Each partition's log start offset.
    Earliest,
    /// Each partition's high watermark.
    Latest,
    /// This offset on every partition.
    Offset(i64),
}

/// A session with a cluster: the bootstrap connection and one per broker, each logged
/// in with SASL where a login is given.
pub struct Admin {
    bootstrap: Connection,
    brokers: BTreeMap<i32, String>,
    connections: HashMap<i32, Connection>,
    login: Option<SaslLogin>,
}

impl Admin {
    /// Connects to the first of `bootstrap`'s comma-separated addresses that answers
    /// (logging in as `login`, if given) and learns the brokers from it, as Kafka's
    /// `--bootstrap-server` list does: a host that is down is passed over. When none
    /// answers, the error is the last address's.
    pub fn connect(bootstrap: &str, login: Option<SaslLogin>) -> Result<Admin> {
        let mut failed = None;
        for address in bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
        {
            match Admin::connect_one(address, login.clone()) {
                Ok(admin) => return Ok(admin),
                Err(e) => failed = Some(e),
            }
        }
        Err(failed.unwrap_or_else(|| {
            AdminError::Refused(format!("no bootstrap address in {bootstrap:?}"))
        }))
    }

    fn connect_one(bootstrap: &str, login: Option<SaslLogin>) -> Result<Admin> {
        let mut admin = Admin {
            bootstrap: Connection::open_as(bootstrap, CLIENT_ID, login.as_ref())?,
            brokers: BTreeMap::new(),
            connections: HashMap::new(),
            login,
        };
        let m = admin.metadata(Some(Vec::new()))?;
        admin.brokers = m
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        Ok(admin)
    }

    pub(super) fn node(&mut self, id: i32) -> Result<&mut Connection> {
        if !self.connections.contains_key(&id) {
            let addr = self.brokers.get(&id).ok_or_else(|| {
                AdminError::Refused(format!("broker {id} is not in the cluster metadata"))
            })?;
            let c = Connection::open_as(addr, CLIENT_ID, self.login.as_ref())?;
            self.connections.insert(id, c);
        }
        Ok(self.connections.get_mut(&id).expect("inserted"))
    }

    /// The bootstrap broker's connection, for requests any broker answers.
    pub(super) fn bootstrap(&mut self) -> &mut Connection {
        &mut self.bootstrap
    }

    fn metadata(&mut self, topics: Option<Vec<String>>) -> Result<MetadataResponse> {
        let mut req = MetadataRequest::default();
        req.topics = topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    let mut r = MetadataRequestTopic::default();
                    r.name = Some(name(t));
                    r
                })
                .collect()
        });
        Ok(self.bootstrap.call(&req, 12)?)
    }

    /// `topics list`: every topic with its partition count.
    pub fn topics_list(&mut self) -> Result<String> {
        let m = self.metadata(None)?;
        let mut out = String::from("TOPIC\tPARTITIONS\n");
        let mut topics: Vec<_> = m.topics.iter().collect();
        topics.sort_by_key(|t| t.name.as_ref().map(|n| n.0.as_str().to_string()));
        for t in topics {
            let n = t.name.as_ref().map_or("", |n| n.0.as_str());
            out.push_str(&format!("{n}\t{}\n", t.partitions.len()));
        }
        Ok(out)
    }

    /// `topics create NAME --partitions N [--replication-factor R]` (-1: the broker's
    /// default).
    pub fn topics_create(
        &mut self,
        topic: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[String],
    ) -> Result<String> {
        let mut t = CreatableTopic::default();
        t.name = name(topic);
        t.num_partitions = partitions;
        t.replication_factor = replication_factor;
        for pair in configs {
            let (key, value) = key_value(pair)?;
            t.configs.push(
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string(key.to_string()))
                    .with_value(Some(StrBytes::from_string(value.to_string()))),
            );
        }
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let r = self.bootstrap.call(&req, 7)?;
        let result = r
            .topics
            .first()
            .ok_or_else(|| AdminError::Refused("empty CreateTopics answer".into()))?;
        let why = result.error_message.as_ref().map_or("", |m| m.as_str());
        check(result.error_code, format!("create topic {topic}: {why}"))?;
        Ok(format!(
            "created topic {topic} with {partitions} partitions\n"
        ))
    }

    /// `topics add-partitions NAME --partitions N`: grows the topic to N partitions.
    pub fn topics_add_partitions(&mut self, topic: &str, partitions: i32) -> Result<String> {
        let mut req = CreatePartitionsRequest::default();
        req.topics = vec![CreatePartitionsTopic::default()
            .with_name(name(topic))
            .with_count(partitions)
            .with_assignments(None)];
        req.timeout_ms = 30_000;
        let r = self.bootstrap.call(&req, 3)?;
        let result = r
            .results
            .first()
            .ok_or_else(|| AdminError::Refused("empty CreatePartitions answer".into()))?;
        check(result.error_code, format!("add partitions to {topic}"))?;
        Ok(format!("topic {topic} now has {partitions} partitions\n"))
    }

    /// `topics delete-records NAME --partition P --before OFFSET`: deletes the
    /// partition's records before OFFSET (-1: up to the high watermark), on its leader.
    pub fn topics_delete_records(
        &mut self,
        topic: &str,
        partition: i32,
        before: i64,
    ) -> Result<String> {
        let leader = self
            .leaders(topic)?
            .into_iter()
            .find(|(_, p, _)| *p == partition)
            .map(|(_, _, leader)| leader)
            .ok_or_else(|| AdminError::Refused(format!("{topic} has no partition {partition}")))?;
        let mut req = DeleteRecordsRequest::default();
        req.topics = vec![DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(before)])];
        req.timeout_ms = 30_000;
        let r = self.node(leader)?.call(&req, 2)?;
        let p = r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| AdminError::Refused("empty DeleteRecords answer".into()))?;
        check(
            p.error_code,
            format!("delete records of {topic}/{partition}"),
        )?;
        Ok(format!(
            "{topic}/{partition}: records before {} deleted (log start offset {})\n",
            p.low_watermark, p.low_watermark
        ))
    }

    /// `topics delete NAME`.
    pub fn topics_delete(&mut self, topic: &str) -> Result<String> {
        let mut req = DeleteTopicsRequest::default();
        req.topic_names = vec![name(topic)];
        req.timeout_ms = 30_000;
        let r = self.bootstrap.call(&req, 5)?;
        let result = r
            .responses
            .first()
            .ok_or_else(|| AdminError::Refused("empty DeleteTopics answer".into()))?;
        check(result.error_code, format!("delete topic {topic}"))?;
        Ok(format!("deleted topic {topic}\n"))
    }

    /// Earliest or latest offsets of partitions, asked of each partition's leader.
    pub(super) fn offsets(
        &mut self,
        leaders: &[(String, i32, i32)],
        timestamp: i64,
    ) -> Result<HashMap<(String, i32), i64>> {
        let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
        // A partition without a leader (its host is fenced) has no offsets to show.
        for (topic, p, leader) in leaders.iter().filter(|(_, _, l)| *l >= 0) {
            by_leader
                .entry(*leader)
                .or_default()
                .push((topic.clone(), *p));
        }
        let mut out = HashMap::new();
        for (leader, parts) in by_leader {
            let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for (t, p) in parts {
                topics.entry(t).or_default().push(p);
            }
            let mut req = ListOffsetsRequest::default();
            req.replica_id = BrokerId(-1);
            req.topics = topics
                .into_iter()
                .map(|(t, ps)| {
                    let mut lt = ListOffsetsTopic::default();
                    lt.name = name(&t);
                    lt.partitions = ps
                        .into_iter()
                        .map(|p| {
                            let mut lp = ListOffsetsPartition::default();
                            lp.partition_index = p;
                            lp.timestamp = timestamp;
                            lp
                        })
                        .collect();
                    lt
                })
                .collect();
            let r = self.node(leader)?.call(&req, 7)?;
            for t in r.topics {
                for p in t.partitions {
                    check(
                        p.error_code,
                        format!("offsets of {}-{}", t.name.0.as_str(), p.partition_index),
                    )?;
                    out.insert((t.name.0.as_str().to_string(), p.partition_index), p.offset);
                }
            }
        }
        Ok(out)
    }

    pub(super) fn leaders(&mut self, topic: &str) -> Result<Vec<(String, i32, i32)>> {
        let m = self.metadata(Some(vec![topic.to_string()]))?;
        let t = m
            .topics
            .first()
            .ok_or_else(|| AdminError::Refused(format!("no metadata for {topic}")))?;
        check(t.error_code, format!("topic {topic}"))?;
        let mut out: Vec<_> = t
            .partitions
            .iter()
            .map(|p| (topic.to_string(), p.partition_index, p.leader_id.0))
            .collect();
        out.sort();
        Ok(out)
    }

    /// `topics describe NAME`: each partition's leader (node), replicas and offsets; a
    /// partition whose host is fenced shows no leader and no offsets.
    pub fn topics_describe(&mut self, topic: &str) -> Result<String> {
        let leaders = self.leaders(topic)?;
        let list = |nodes: &[kafka_protocol::messages::BrokerId]| {
            nodes
                .iter()
                .map(|n| n.0.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let replicas: HashMap<i32, (String, String, i32)> = self
            .metadata(Some(vec![topic.to_string()]))?
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| {
                let row = (list(&p.replica_nodes), list(&p.isr_nodes), p.leader_epoch);
                (p.partition_index, row)
            })
            .collect();
        let earliest = self.offsets(&leaders, -2)?;
        let latest = self.offsets(&leaders, -1)?;
        let mut out = format!(
            "topic {topic}: {} partitions\nPARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tLOG-START\tHIGH-WATERMARK\n",
            leaders.len()
        );
        let shown = |o: Option<&i64>| o.map_or("-".to_string(), i64::to_string);
        for (t, p, leader) in &leaders {
            let key = (t.clone(), *p);
            let leader = if *leader < 0 {
                "none".to_string()
            } else {
                leader.to_string()
            };
            let (nodes, isr, epoch) = replicas.get(p).cloned().unwrap_or_default();
            out.push_str(&format!(
                "{p}\t{leader}\t{epoch}\t{nodes}\t{isr}\t{}\t{}\n",
                shown(earliest.get(&key)),
                shown(latest.get(&key))
            ));
        }
        let overrides = self.topic_overrides(topic)?;
        if !overrides.is_empty() {
            out.push_str("CONFIG\tVALUE\n");
            for (key, value) in overrides {
                out.push_str(&format!("{key}\t{value}\n"));
            }
        }
        Ok(out)
    }

    /// The topic's own config overrides (DescribeConfigs entries whose source is the
    /// topic).
    fn topic_overrides(&mut self, topic: &str) -> Result<Vec<(String, String)>> {
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configuration_keys(None)];
        let r = self.bootstrap.call(&req, 4)?;
        let result = r
            .results
            .first()
            .ok_or_else(|| AdminError::Refused("empty DescribeConfigs answer".into()))?;
        check(result.error_code, format!("describe configs of {topic}"))?;
        Ok(result
            .configs
            .iter()
            .filter(|c| c.config_source == DYNAMIC_TOPIC_CONFIG)
            .map(|c| {
                let value = c.value.as_ref().map_or("", |v| v.as_str());
                (c.name.to_string(), value.to_string())
            })
            .collect())
    }

    /// `topics alter-config NAME key=value... [--delete KEY]...`: sets and removes a
    /// topic's config overrides, leaving the others.
    pub fn topics_alter_config(
        &mut self,
        topic: &str,
        set: &[String],
        delete: &[String],
    ) -> Result<String> {
        let mut configs = Vec::new();
        for pair in set {
            let (key, value) = key_value(pair)?;
            configs.push(
                AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.to_string()))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_string(value.to_string()))),
            );
        }
        for key in delete {
            configs.push(
                AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.clone()))
                    .with_config_operation(1),
            );
        }
        let mut req = IncrementalAlterConfigsRequest::default();
        req.resources = vec![AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configs(configs)];
        let r = self.bootstrap.call(&req, 1)?;
        let result = r
            .responses
            .first()
            .ok_or_else(|| AdminError::Refused("empty IncrementalAlterConfigs answer".into()))?;
        if result.error_code != 0 {
            let why = result.error_message.as_ref().map_or("", |m| m.as_str());
            check(
                result.error_code,
                format!("alter configs of {topic}: {why}"),
            )?;
        }
        let now = self.topic_overrides(topic)?;
        let mut out = format!("topic {topic} configs:\n");
        for (key, value) in now {
            out.push_str(&format!("{key}={value}\n"));
        }
        Ok(out)
    }

    /// The broker ids of the cluster.
    pub(super) fn broker_ids(&self) -> Vec<i32> {
        self.brokers.keys().copied().collect()
    }
}

/// A `key=value` config pair from the command line.
fn key_value(pair: &str) -> Result<(&str, &str)> {
    pair.split_once('=')
        .ok_or_else(|| AdminError::Refused(format!("{pair:?} is not key=value")))
}
