//! The cluster's metadata as one value: the hosts and their shards, the topics with the
//! node of every partition, and the table of group coordinators. The controller quorum
//! replicates the [`Command`]s that change it; every voter applies them in log order
//! with [`ClusterState::apply`], which is deterministic, so every voter holds the same
//! value at the same log index.

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicU64, Ordering},
};

use serde::{Deserialize, Serialize};

use crate::security::state::{SecurityChange, SecurityState};

pub use super::metadata_change::MetadataChange;
use super::{
    partition_state::{IsrRefusal, PartitionState},
    placement::{host_of, node_id, place, replicas, shard_of, NodeId, ShardId},
    replication_throttle::BrokerThrottles,
    topic::TopicInfo,
    topic_config::TopicConfigs,
};

/// The offsets journal topic's name, as Kafka's (see `group::journal`).
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Replicas of the offsets journal topic (Kafka's `offsets.topic.replication.factor`),
/// or as many as there are live hosts below that.
pub const OFFSETS_REPLICATION_FACTOR: usize = 3;

/// The offsets journal's segment size: its snapshots free a segment at a time, so it
/// stays near twice its live state plus one segment (Kafka's
/// `offsets.topic.segment.bytes` is 100 MiB).
pub const OFFSETS_SEGMENT_BYTES: u64 = 16 << 20;

/// One host as it registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    /// The host clients are told to connect to.
    pub advertise: String,
    /// Shard 0's port; shard `n` listens on `port + n`.
    pub port: u16,
    /// Shard 0's TLS port, when the host serves TLS (absent in metadata written before).
    #[serde(default)]
    pub tls_port: Option<u16>,
    /// How many shards it runs.
    pub shards: u32,
    /// Random per process start: tells a restart of the same host from a second
    /// process claiming its node id.
    pub incarnation: u64,
    /// Missed its session timeout: its partitions have no leader until it returns.
    pub fenced: bool,
    /// Being drained for maintenance (`weir cluster drain`): it leads nothing and gets
    /// no new replicas, while its replicas keep following (absent before drains: no).
    #[serde(default)]
    pub draining: bool,
}

#[cfg(test)]
impl HostRecord {
    /// An unfenced, undraining host of `shards` shards on 127.0.0.1:9092, for tests.
    pub(crate) fn for_tests(shards: u32) -> HostRecord {
        HostRecord {
            advertise: "127.0.0.1".into(),
            port: 9092,
            tls_port: None,
            shards,
            incarnation: 1,
            fenced: false,
            draining: false,
        }
    }
}

impl HostRecord {
    /// The Kafka node ids of this host's shards.
    pub fn nodes(&self, host: u32) -> impl Iterator<Item = NodeId> {
        (0..self.shards as usize).map(move |s| node_id(host, ShardId(s)))
    }
}

/// The metadata every host works from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterState {
    /// Chosen once, by the first controller leader; a host remembers the cluster it
    /// joined and refuses to join another.
    pub cluster_id: String,
    /// Every host that ever registered, by host node id.
    pub hosts: BTreeMap<u32, HostRecord>,
    /// Every topic, by name.
    pub topics: BTreeMap<String, TopicInfo>,
    /// The group coordinators: group `g` is coordinated by
    /// `coordinators[coordinator_slot(g)]`. Empty until the first FindCoordinator.
    pub coordinators: Vec<NodeId>,
    /// Users' credentials (absent in metadata written before SASL: none).
    #[serde(default)]
    pub security: SecurityState,
    /// Brokers' replication throttle rates (none set: absent).
    #[serde(default)]
    pub throttles: BrokerThrottles,
}

/// Why metadata could not be changed or read. Travels between hosts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum MetadataError {
    /// CreateTopics for a name in use.
    #[error("topic {0} already exists")]
    AlreadyExists(String),
    /// A change to a topic that does not exist.
    #[error("topic {0} does not exist")]
    Unknown(String),
    /// CreatePartitions that would not add partitions.
    #[error("topic {topic} has {current} partitions; it can only grow (asked for {asked})")]
    CannotShrink {
        /// The topic.
        topic: String,
        /// Its partitions now.
        current: u32,
        /// What was asked.
        asked: u32,
    },
    /// A topic config was refused.
    #[error("{0}")]
    InvalidConfig(String),
    /// No live host has shards to place partitions on.
    #[error("no live broker to place partitions on")]
    NoBrokers,
    /// A host was refused by the controller; it must not serve.
    #[error("registration refused: {0}")]
    Refused(String),
    /// The host is not registered (or was replaced); it must register again.
    #[error("host {0} is not registered")]
    NotRegistered(u32),
    /// The controller asked is not the leader; `leader` is the one it knows, if any.
    #[error("not the controller leader (leader: {leader:?})")]
    NotLeader {
        /// The leader's controller address, when known.
        leader: Option<String>,
    },
    /// The quorum could not commit the change in time (a majority is missing).
    #[error("the controller quorum is unavailable: {0}")]
    Unavailable(String),
    /// A topic's configs changed since the change was computed (another host altered
    /// them first); the asker recomputes from the new ones.
    #[error("the configs of topic {0} changed meanwhile")]
    Conflict(String),
    /// More replicas asked for than there are live hosts to hold them.
    #[error("replication factor {asked} needs as many live hosts; there are {hosts}")]
    ReplicationFactor {
        /// The factor asked for.
        asked: usize,
        /// Live hosts.
        hosts: usize,
    },
    /// An ISR change from a leader whose epoch is not current.
    #[error("leader epoch {epoch} of {topic}-{partition} is not current")]
    StaleLeaderEpoch {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The epoch the proposer had.
        epoch: i32,
    },
    /// An ISR that lacks the leader or names a node that is not a replica.
    #[error("invalid ISR for {topic}-{partition}")]
    InvalidIsr {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
    },
}

/// One change to the cluster metadata: an entry of the controller's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Names the cluster; only the first one applies.
    SetClusterId(String),
    /// A host registers (or re-registers after a restart).
    RegisterHost {
        /// Its node id.
        host: u32,
        /// What it said about itself.
        record: HostRecord,
    },
    /// A host missed its session timeout (`true`) or heartbeat again (`false`).
    SetFenced {
        /// Its node id.
        host: u32,
        /// Fenced or not.
        fenced: bool,
    },
    /// A new topic, already placed.
    CreateTopic(TopicInfo),
    /// A topic is deleted.
    DeleteTopic(String),
    /// A topic grows: `placement` is the node of every partition, old ones unchanged.
    AddPartitions {
        /// The topic.
        name: String,
        /// Its new placement.
        placement: Vec<NodeId>,
        /// The new partitions' states (absent from controllers that predate replication:
        /// one replica each).
        #[serde(default)]
        states: Vec<PartitionState>,
    },
    /// A topic's config overrides are replaced, if they still are `expected` (a change
    /// computed from older overrides would lose another host's change).
    SetConfigs {
        /// The topic.
        name: String,
        /// What the overrides must be for the change to apply.
        expected: TopicConfigs,
        /// The new overrides.
        configs: TopicConfigs,
    },
    /// The group coordinator table is set (once).
    SetCoordinators(Vec<NodeId>),
    /// A leader's ISR change, if its epoch is still current.
    AlterIsr {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The proposer's leader epoch.
        leader_epoch: i32,
        /// The new ISR.
        isr: Vec<NodeId>,
    },
    /// Preferred replicas that are live and in sync take their leadership back.
    PreferLeaders,
    /// Kafka's AlterPartitionReassignments (see [`MetadataChange::Reassign`]).
    Reassign {
        /// Topic, partition and target replicas of each.
        moves: Vec<super::metadata_change::ReplicaMove>,
    },
    /// Kafka's ElectLeaders for these partitions (see [`MetadataChange::ElectLeaders`]).
    ElectLeaders {
        /// Topic and partition of each.
        partitions: Vec<(String, u32)>,
        /// An unclean election rather than the preferred replica's.
        unclean: bool,
    },
    /// A host starts (`true`) or ends a drain: while draining, its partitions are led
    /// by in-sync replicas elsewhere.
    SetDraining {
        /// Its node id.
        host: u32,
        /// Draining or not.
        draining: bool,
        /// Also move its replicas to other live hosts, where there are any.
        #[serde(default)]
        reassign: bool,
    },
    /// A change to the users' credentials.
    Security(SecurityChange),
    /// Broker `node`'s replication throttle rates set (`Some`) or removed.
    SetBrokerThrottles {
        /// The broker, or every broker's default.
        node: i32,
        /// Config name and rate.
        set: Vec<(String, Option<u64>)>,
    },
}

impl ClusterState {
    /// Applies one command. Deterministic: the outcome depends only on `self` and `cmd`.
    /// A refused command changes nothing.
    pub fn apply(&mut self, cmd: Command) -> Result<(), MetadataError> {
        match cmd {
            Command::SetClusterId(id) => {
                if self.cluster_id.is_empty() {
                    self.cluster_id = id;
                }
            }
            Command::RegisterHost { host, mut record } => {
                let previous = self.hosts.get(&host).cloned();
                // A drain outlives the host's restarts until it is undone.
                record.draining = previous.as_ref().is_some_and(|h| h.draining);
                let incarnation = record.incarnation;
                self.hosts.insert(host, record);
                match previous {
                    // A new process of a host never fenced (it restarted within its
                    // session): as Kafka fences a broker's old incarnation, its
                    // leadership moves to in-sync replicas elsewhere and it leaves every
                    // ISR it is not the last of — it comes back by catching up, never
                    // as the leader it was with whatever its restart kept.
                    Some(p) if !p.fenced && p.incarnation != incarnation => {
                        self.elect_leaders(host, true);
                        self.elect_leaders(host, false);
                    }
                    // Back from fenced: partitions only it kept in sync are led again.
                    Some(p) if p.fenced => self.elect_leaders(host, false),
                    _ => {}
                }
                self.elect_unclean();
            }
            Command::SetDraining {
                host,
                draining,
                reassign,
            } => {
                let h = self
                    .hosts
                    .get_mut(&host)
                    .ok_or(MetadataError::NotRegistered(host))?;
                h.draining = draining;
                if draining {
                    let hosts = &self.hosts;
                    let eligible = |n: NodeId| host_of(n) != host && live_node(hosts, n);
                    for t in self.topics.values_mut() {
                        for state in &mut t.states {
                            state.lead_elsewhere(host, eligible);
                        }
                    }
                    if reassign {
                        self.move_replicas_off(host);
                    }
                }
            }
            Command::SetFenced { host, fenced } => {
                let h = self
                    .hosts
                    .get_mut(&host)
                    .ok_or(MetadataError::NotRegistered(host))?;
                h.fenced = fenced;
                self.elect_leaders(host, fenced);
                self.elect_unclean();
            }
            Command::CreateTopic(mut info) => {
                if self.topics.contains_key(&info.name) {
                    return Err(MetadataError::AlreadyExists(info.name));
                }
                info.fill_states();
                self.topics.insert(info.name.clone(), info);
            }
            Command::DeleteTopic(name) => {
                self.topics
                    .remove(&name)
                    .ok_or(MetadataError::Unknown(name))?;
            }
            Command::AddPartitions {
                name,
                placement,
                states,
            } => {
                let t = self
                    .topics
                    .get_mut(&name)
                    .ok_or_else(|| MetadataError::Unknown(name.clone()))?;
                let asked = placement.len() as u32;
                if asked <= t.partitions || placement[..t.placement.len()] != t.placement[..] {
                    return Err(MetadataError::CannotShrink {
                        topic: name,
                        current: t.partitions,
                        asked,
                    });
                }
                t.fill_states();
                t.partitions = asked;
                t.placement = placement;
                t.states.extend(states);
                t.states.truncate(asked as usize);
                t.fill_states();
            }
            Command::SetConfigs {
                name,
                expected,
                configs,
            } => {
                let t = self
                    .topics
                    .get_mut(&name)
                    .ok_or_else(|| MetadataError::Unknown(name.clone()))?;
                if t.configs != expected {
                    return Err(MetadataError::Conflict(name));
                }
                t.configs = configs;
                self.elect_unclean();
            }
            Command::SetCoordinators(nodes) => {
                if self.coordinators.is_empty() {
                    self.coordinators = nodes;
                }
            }
            Command::AlterIsr {
                topic,
                partition,
                leader_epoch,
                isr,
            } => {
                let hosts = &self.hosts;
                let state = self
                    .topics
                    .get_mut(&topic)
                    .and_then(|t| t.states.get_mut(partition as usize))
                    .ok_or_else(|| MetadataError::Unknown(topic.clone()))?;
                // A fenced host's replica never joins: it cannot be caught up. (A
                // draining host's may: it keeps following.)
                if isr
                    .iter()
                    .any(|n| !state.isr.contains(n) && unfenced_host(hosts, *n).is_none())
                {
                    return Err(MetadataError::InvalidIsr { topic, partition });
                }
                state
                    .alter_isr(leader_epoch, isr)
                    .map_err(|refusal| match refusal {
                        IsrRefusal::StaleEpoch => MetadataError::StaleLeaderEpoch {
                            topic,
                            partition,
                            epoch: leader_epoch,
                        },
                        IsrRefusal::Invalid => MetadataError::InvalidIsr { topic, partition },
                    })?;
                // A move completes once its new replicas are in sync.
                state.finish_move(
                    |n| live_node(hosts, n),
                    |n| unfenced_host(hosts, n).is_some(),
                );
            }
            Command::PreferLeaders => {
                let hosts = &self.hosts;
                let live = |n: NodeId| live_node(hosts, n);
                for t in self.topics.values_mut() {
                    for state in &mut t.states {
                        state.prefer(live);
                    }
                }
            }
            Command::ElectLeaders {
                partitions,
                unclean,
            } => {
                self.elect_requested(&partitions, unclean);
            }
            Command::Reassign { moves } => self.reassign(&moves),
            Command::Security(change) => self.security.apply(&change),
            Command::SetBrokerThrottles { node, set } => {
                for (key, rate) in set {
                    self.throttles.set(node, &key, rate);
                }
            }
        }
        Ok(())
    }

    /// True when some partition's preferred replica is live and in sync but does not
    /// lead it ([`Command::PreferLeaders`] would move it).
    pub fn preferred_leaders_due(&self) -> bool {
        let live = |n: NodeId| live_node(&self.hosts, n);
        self.topics
            .values()
            .flat_map(|t| &t.states)
            .any(|s| s.clone().prefer(live))
    }

    /// Live hosts and their shard counts, ascending by id: where replicas can go.
    pub fn live_hosts(&self) -> Vec<(u32, u32)> {
        self.hosts
            .iter()
            .filter(|(_, h)| !h.fenced && !h.draining)
            .map(|(id, h)| (*id, h.shards))
            .collect()
    }

    /// The nodes partitions may be placed on: every shard of every live host,
    /// shard-major (every host's shard 0 first), so consecutive partitions of a topic
    /// land on different hosts.
    pub fn placeable_nodes(&self) -> Vec<NodeId> {
        let live: Vec<(u32, &HostRecord)> = self
            .hosts
            .iter()
            .filter(|(_, h)| !h.fenced && !h.draining)
            .map(|(id, h)| (*id, h))
            .collect();
        let deepest = live.iter().map(|(_, h)| h.shards).max().unwrap_or(0);
        (0..deepest as usize)
            .flat_map(|s| {
                live.iter()
                    .filter(move |(_, h)| (s as u32) < h.shards)
                    .map(move |(id, _)| node_id(*id, ShardId(s)))
            })
            .collect()
    }

    /// A new topic with a fresh id, its leaders placed over the live nodes (or, when
    /// there are none, over host `fallback_host`'s) and `replication_factor` replicas
    /// per partition, each on its own live host.
    pub fn new_topic(
        &self,
        name: &str,
        partitions: u32,
        replication_factor: usize,
        configs: TopicConfigs,
        fallback_host: u32,
    ) -> Result<TopicInfo, MetadataError> {
        let mut nodes = self.placeable_nodes();
        let mut hosts = self.live_hosts();
        if nodes.is_empty() {
            if let Some(h) = self.hosts.get(&fallback_host) {
                nodes = h.nodes(fallback_host).collect();
                hosts = vec![(fallback_host, h.shards)];
            }
        }
        let placement = place(&nodes, name, 0..partitions);
        let states = self.replica_states(&placement, &hosts, replication_factor)?;
        Ok(TopicInfo {
            name: name.to_string(),
            id: fresh_id(name),
            partitions,
            configs,
            placement,
            states,
        })
    }

    /// The states of new partitions led by `leaders`, `factor` replicas each on live
    /// hosts `hosts`.
    pub fn replica_states(
        &self,
        leaders: &[NodeId],
        hosts: &[(u32, u32)],
        factor: usize,
    ) -> Result<Vec<PartitionState>, MetadataError> {
        let sets = replicas(leaders, hosts, factor).ok_or(MetadataError::ReplicationFactor {
            asked: factor,
            hosts: hosts.len(),
        })?;
        Ok(sets.into_iter().map(PartitionState::new).collect())
    }

    /// The host record of the host node `node` belongs to, when it is live.
    pub fn live_host_of(&self, node: NodeId) -> Option<&HostRecord> {
        unfenced_host(&self.hosts, node)
    }
}

/// The record of `node`'s host when it is registered, not fenced and has that shard.
pub fn unfenced_host(hosts: &BTreeMap<u32, HostRecord>, node: NodeId) -> Option<&HostRecord> {
    hosts
        .get(&host_of(node))
        .filter(|h| !h.fenced && (shard_of(node).0 as u32) < h.shards)
}

/// True when `node` may lead: its host is unfenced and not draining.
pub fn live_node(hosts: &BTreeMap<u32, HostRecord>, node: NodeId) -> bool {
    unfenced_host(hosts, node).is_some_and(|h| !h.draining)
}

/// A topic id unique across creations: the name's CRC, the time in nanoseconds and a
/// process-wide counter, laid out as a version-4-style UUID.
fn fresh_id(name: &str) -> [u8; 16] {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&nanos.to_be_bytes());
    id[8..12].copy_from_slice(&crc32c::crc32c(name.as_bytes()).to_be_bytes());
    id[12..].copy_from_slice(&(n as u32).to_be_bytes());
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(shards: u32) -> HostRecord {
        HostRecord::for_tests(shards)
    }

    fn topic(name: &str, placement: Vec<NodeId>) -> TopicInfo {
        TopicInfo {
            name: name.into(),
            id: [1; 16],
            partitions: placement.len() as u32,
            configs: TopicConfigs::new(),
            placement,
            states: Vec::new(),
        }
    }

    #[test]
    fn placeable_nodes_interleave_hosts_and_skip_fenced_ones() {
        let mut s = ClusterState::default();
        for (id, shards) in [(1, 2), (2, 1), (3, 2)] {
            s.apply(Command::RegisterHost {
                host: id,
                record: host(shards),
            })
            .expect("register");
        }
        assert_eq!(s.placeable_nodes(), [1024, 2048, 3072, 1025, 3073]);
        s.apply(Command::SetFenced {
            host: 2,
            fenced: true,
        })
        .expect("fence");
        assert_eq!(s.placeable_nodes(), [1024, 3072, 1025, 3073]);
        assert!(s.live_host_of(2048).is_none());
        assert!(s.live_host_of(1025).is_some());
        assert!(s.live_host_of(1026).is_none(), "host 1 has two shards");
    }

    #[test]
    fn refused_commands_change_nothing() {
        let mut s = ClusterState::default();
        s.apply(Command::CreateTopic(topic("t", vec![0, 1])))
            .expect("create");
        let before = s.clone();
        for refused in [
            Command::CreateTopic(topic("t", vec![0])),
            Command::DeleteTopic("missing".into()),
            Command::AddPartitions {
                name: "t".into(),
                placement: vec![0],
                states: Vec::new(),
            },
            Command::AddPartitions {
                name: "t".into(),
                placement: vec![1, 1, 0],
                states: Vec::new(),
            },
            Command::SetFenced {
                host: 9,
                fenced: true,
            },
        ] {
            assert!(s.apply(refused).is_err());
            assert_eq!(s, before);
        }
        s.apply(Command::AddPartitions {
            name: "t".into(),
            placement: vec![0, 1, 0],
            states: Vec::new(),
        })
        .expect("grow");
        assert_eq!(s.topics["t"].partitions, 3);
        let mut retention = TopicConfigs::new();
        retention.insert("retention.ms".into(), "1000".into());
        s.apply(Command::SetConfigs {
            name: "t".into(),
            expected: TopicConfigs::new(),
            configs: retention.clone(),
        })
        .expect("configs as expected");
        let stale = Command::SetConfigs {
            name: "t".into(),
            expected: TopicConfigs::new(),
            configs: TopicConfigs::new(),
        };
        assert_eq!(s.apply(stale), Err(MetadataError::Conflict("t".into())));
        assert_eq!(
            s.topics["t"].configs, retention,
            "a stale change loses nothing"
        );
        s.apply(Command::SetClusterId("a".into())).expect("id");
        s.apply(Command::SetClusterId("b".into())).expect("id");
        assert_eq!(s.cluster_id, "a", "the first cluster id stays");
    }
}
