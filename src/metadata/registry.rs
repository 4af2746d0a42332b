//! The topic registry: this host's view of the cluster metadata (every topic's name,
//! id, partition count, configs and placement; the hosts; the group coordinators),
//! shared by all shards of the host.
//!
//! A single host keeps it in `topics.json` in the data directory and changes it itself.
//! A host of a cluster sends every change to the controller quorum
//! ([`ControllerLink`]) and [`TopicRegistry::install`]s the metadata the controller
//! publishes, versioned by the controller's log index.
//!
//! Changes are rare (CreateTopics, DeleteTopics, auto-creation), reads are frequent, so
//! the registry is one map behind a lock that is only ever held for a copy or an insert,
//! plus a version number shards compare on every request to notice changes and open or
//! drop their partitions. A change is written (temporary file, fdatasync, rename,
//! directory fsync) on a blocking-pool thread before it becomes visible, so a topic a
//! client was told exists survives a crash.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
};

use super::{
    cluster_state::{ClusterState, HostRecord, MetadataChange, MetadataError, OFFSETS_TOPIC},
    controller_link::ControllerLink,
    placement::{node_id, place, shard_of, NodeId},
    registry_files::{read_json, write_json, ClusterFile, FileError, RegistryFile, CLUSTER_FILE},
    replication_throttle::BrokerThrottles,
    topic_config::{validate_all, ConfigError, TopicConfigs},
};

pub use super::{registry_files::REGISTRY_FILE, topic::TopicInfo};

/// Why a registry change was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// CreateTopics for a name in use.
    #[error("topic {0} already exists")]
    AlreadyExists(String),
    /// DeleteTopics for a name not in use.
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
    /// A topic config change was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Another change to the same topic is being written.
    #[error("another change to topic {0} is in progress")]
    InProgress(String),
    /// The controller refused the change or could not be reached.
    #[error(transparent)]
    Cluster(MetadataError),
    /// A metadata file could not be read or written.
    #[error(transparent)]
    File(#[from] FileError),
}

impl From<MetadataError> for RegistryError {
    fn from(e: MetadataError) -> Self {
        match e {
            MetadataError::AlreadyExists(t) => RegistryError::AlreadyExists(t),
            MetadataError::Unknown(t) => RegistryError::Unknown(t),
            MetadataError::CannotShrink {
                topic,
                current,
                asked,
            } => RegistryError::CannotShrink {
                topic,
                current,
                asked,
            },
            other => RegistryError::Cluster(other),
        }
    }
}

struct State {
    /// `cluster.topics` holds the visible topics.
    cluster: ClusterState,
    pending: BTreeMap<String, TopicInfo>,
    /// The node of the controller leader's host, for Metadata.
    controller: Option<NodeId>,
}

/// Who changes the metadata.
enum Backend {
    /// This host alone, for a single-host broker: writes `topics.json`.
    Local {
        /// This host's node id.
        host: u32,
    },
    /// The controller quorum; the registry only installs what it publishes.
    Controller(ControllerLink),
}

/// How long a shard waits for a change the controller applied to reach this host.
const PUBLISH_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// The hosts, group coordinators and controller as Metadata and FindCoordinator need
/// them: one copy, taken under the registry's lock.
#[derive(Debug, Clone)]
pub struct ClusterView {
    /// The cluster's id.
    pub cluster_id: String,
    /// Every registered host.
    pub hosts: BTreeMap<u32, HostRecord>,
    /// The group coordinator table.
    pub coordinators: Vec<NodeId>,
    /// The controller's node, when known.
    pub controller: Option<NodeId>,
    /// The ACLs.
    pub acls: std::sync::Arc<Vec<crate::security::acl::AclBinding>>,
    /// Brokers' replication throttle rates.
    pub throttles: BrokerThrottles,
}

/// The shared topic registry. `Send + Sync`: one per broker.
pub struct TopicRegistry {
    path: PathBuf,
    state: Mutex<State>,
    /// Serialises file writes; held only by blocking-pool threads.
    write: Mutex<()>,
    version: AtomicU64,
    backend: Backend,
}

impl TopicRegistry {
    /// Loads a single host's registry from `data_dir`, or starts an empty one; `host`
    /// (this host's node id and shards) is the whole cluster. Topics written before
    /// placement was stored are placed where those versions put them. Blocking: call at
    /// start-up, before the shards run.
    pub fn load(
        data_dir: &Path,
        host: u32,
        record: HostRecord,
    ) -> Result<Arc<TopicRegistry>, RegistryError> {
        let path = data_dir.join(REGISTRY_FILE);
        let mut cluster = ClusterState {
            cluster_id: "weir".into(),
            ..ClusterState::default()
        };
        let nodes: Vec<NodeId> = record.nodes(host).collect();
        let file = read_json::<RegistryFile>(&path)?.unwrap_or_default();
        cluster.security = file.security;
        for mut t in file.topics {
            if t.placement.len() != t.partitions as usize {
                t.placement = place(&nodes, &t.name, 0..t.partitions);
            }
            // One host holds every partition, whatever node id it had before.
            for n in &mut t.placement {
                *n = node_id(host, shard_of(*n));
            }
            // One host, one replica: the placement is the whole state.
            t.states.clear();
            t.fill_states();
            cluster.topics.insert(t.name.clone(), t);
        }
        cluster.coordinators = nodes.clone();
        cluster.hosts.insert(host, record);
        Ok(Arc::new(TopicRegistry {
            path,
            state: Mutex::new(State {
                cluster,
                pending: BTreeMap::new(),
                controller: nodes.first().copied(),
            }),
            write: Mutex::new(()),
            version: AtomicU64::new(1),
            backend: Backend::Local { host },
        }))
    }

    /// A cluster host's registry: starts from the metadata this host last installed
    /// (`cluster-metadata.json`, so a host whose controllers are down still serves its
    /// partitions) and changes through `link`. Blocking: call at start-up.
    pub fn clustered(
        data_dir: &Path,
        link: ControllerLink,
    ) -> Result<Arc<TopicRegistry>, RegistryError> {
        let path = data_dir.join(CLUSTER_FILE);
        let (mut cluster, version) = match read_json::<ClusterFile>(&path)? {
            Some(file) => (file.state, file.version),
            None => (ClusterState::default(), 0),
        };
        cluster.topics.values_mut().for_each(TopicInfo::fill_states);
        Ok(Arc::new(TopicRegistry {
            path,
            state: Mutex::new(State {
                cluster,
                pending: BTreeMap::new(),
                controller: None,
            }),
            write: Mutex::new(()),
            version: AtomicU64::new(version),
            backend: Backend::Controller(link),
        }))
    }

    /// The topics of a single host's `topics.json` in `data_dir` (none when there is no
    /// such file): what a host brings into a cluster the first time it joins one.
    pub fn legacy_topics(data_dir: &Path) -> Result<Vec<TopicInfo>, RegistryError> {
        read_topics(&data_dir.join(REGISTRY_FILE))
    }
}

mod controller_calls;
mod security;

/// The topics of the `topics.json` at `path` (none when it does not exist).
fn read_topics(path: &Path) -> Result<Vec<TopicInfo>, RegistryError> {
    Ok(read_json::<RegistryFile>(path)?.map_or_else(Vec::new, |f| f.topics))
}

impl TopicRegistry {
    /// Installs metadata the controller published at log index `version`, if newer
    /// than what this host has: written to `cluster-metadata.json` first, then made
    /// visible to the shards. Blocking (one small file write): call off the shards.
    pub fn install(
        &self,
        mut state: ClusterState,
        version: u64,
        controller: Option<NodeId>,
    ) -> Result<(), RegistryError> {
        let _writer = self.write.lock().unwrap_or_else(|p| p.into_inner());
        if version <= self.version() {
            self.state().controller = controller;
            return Ok(());
        }
        state.topics.values_mut().for_each(TopicInfo::fill_states);
        write_json(
            &self.path,
            &ClusterFile {
                version,
                state: state.clone(),
            },
        )?;
        let mut s = self.state();
        s.cluster = state;
        s.controller = controller;
        self.version.store(version, Ordering::Release);
        Ok(())
    }

    /// The cluster id, hosts, coordinators and controller. Once the offsets journal
    /// topic exists, a group's coordinator is the leader of its journal partition (-1
    /// while it has none).
    pub fn cluster(&self) -> ClusterView {
        let s = self.state();
        let coordinators = match s.cluster.topics.get(OFFSETS_TOPIC) {
            Some(t) => t.states.iter().map(|st| st.leader.unwrap_or(-1)).collect(),
            None => s.cluster.coordinators.clone(),
        };
        ClusterView {
            cluster_id: s.cluster.cluster_id.clone(),
            hosts: s.cluster.hosts.clone(),
            coordinators,
            controller: s.controller,
            acls: std::sync::Arc::new(s.cluster.security.acls.clone()),
            throttles: s.cluster.throttles.clone(),
        }
    }

    /// The group coordinator table, asking the controller to fill it on first use (as
    /// Kafka creates `__consumer_offsets` on the first FindCoordinator).
    pub async fn coordinators(self: &Arc<Self>) -> Result<Vec<NodeId>, RegistryError> {
        let table = self.cluster().coordinators;
        if !table.is_empty() {
            return Ok(table);
        }
        self.ask_controller(MetadataChange::EnsureCoordinators)
            .await?;
        Ok(self.cluster().coordinators)
    }

    /// Asks the controller to make `isr` the ISR of partition `partition` of `topic`,
    /// which this host leads at `leader_epoch` (Kafka's AlterPartition), and waits until
    /// this host installed the result. A single host never replicates: nothing to do.
    pub async fn alter_isr(
        &self,
        topic: &str,
        partition: u32,
        leader_epoch: i32,
        isr: Vec<NodeId>,
    ) -> Result<(), RegistryError> {
        self.ask_controller(MetadataChange::AlterIsr {
            topic: topic.to_string(),
            partition,
            leader_epoch,
            isr,
        })
        .await
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the map half-changed (every
        // change is one insert or remove), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes whenever the metadata does.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The topic called `name`.
    pub fn get(&self, name: &str) -> Option<TopicInfo> {
        self.state().cluster.topics.get(name).cloned()
    }

    /// Every topic, by name.
    pub fn list(&self) -> Vec<TopicInfo> {
        self.state().cluster.topics.values().cloned().collect()
    }

    /// Creates a topic with `partitions` partitions of `replication_factor` replicas and
    /// a fresh id, durably, then makes it visible. A single host holds one replica.
    pub async fn create(
        self: &Arc<Self>,
        name: &str,
        partitions: u32,
        replication_factor: usize,
        configs: TopicConfigs,
    ) -> Result<TopicInfo, RegistryError> {
        let host = match &self.backend {
            Backend::Local { host } => *host,
            Backend::Controller(_) => {
                let change = MetadataChange::CreateTopic {
                    name: name.to_string(),
                    partitions,
                    replication_factor,
                    configs,
                };
                self.ask_controller(change).await?;
                return self
                    .get(name)
                    .ok_or_else(|| RegistryError::Unknown(name.to_string()));
            }
        };
        let info = {
            let mut s = self.state();
            let info = s
                .cluster
                .new_topic(name, partitions, replication_factor, configs, host)?;
            if s.cluster.topics.contains_key(name) || s.pending.contains_key(name) {
                return Err(RegistryError::AlreadyExists(name.to_string()));
            }
            s.pending.insert(name.to_string(), info.clone());
            info
        };
        let persisted = self.persist().await;
        let mut s = self.state();
        s.pending.remove(name);
        persisted?;
        s.cluster.topics.insert(name.to_string(), info.clone());
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(info)
    }

    /// Grows a topic to `partitions` partitions, durably, then makes them visible (each
    /// shard opens its new partitions on first use; placement puts them where it puts
    /// any partition). With `validate_only`, checks and changes nothing.
    pub async fn add_partitions(
        self: &Arc<Self>,
        name: &str,
        partitions: u32,
        validate_only: bool,
    ) -> Result<TopicInfo, RegistryError> {
        let controlled = matches!(self.backend, Backend::Controller(_));
        if controlled && !validate_only {
            let change = MetadataChange::AddPartitions {
                name: name.to_string(),
                partitions,
            };
            self.ask_controller(change).await?;
            return self
                .get(name)
                .ok_or_else(|| RegistryError::Unknown(name.to_string()));
        }
        let nodes = self.local_nodes();
        self.change(name, validate_only, |current| {
            if partitions <= current.partitions {
                return Err(RegistryError::CannotShrink {
                    topic: name.to_string(),
                    current: current.partitions,
                    asked: partitions,
                });
            }
            let mut grown = current.clone();
            grown.fill_states();
            grown
                .placement
                .extend(place(&nodes, name, current.partitions..partitions));
            grown.partitions = partitions;
            grown.fill_states();
            Ok(grown)
        })
        .await
    }

    /// Replaces a topic's config overrides with what `alter` makes of the current ones,
    /// checked (`topic_config::validate_all`), durably, then makes them visible; shards
    /// apply them to the open partitions at their next look at the registry. `alter`
    /// sees the overrides as they are under the registry's lock, so two changes never
    /// lose one another; on a cluster host the controller applies the result only if
    /// the overrides are still those `alter` saw, and `alter` runs again on the newer
    /// ones when another host changed them first. With `validate_only`, changes nothing.
    pub async fn alter_configs(
        self: &Arc<Self>,
        name: &str,
        validate_only: bool,
        alter: impl Fn(&TopicConfigs) -> Result<TopicConfigs, ConfigError>,
    ) -> Result<TopicInfo, RegistryError> {
        if matches!(self.backend, Backend::Controller(_)) {
            let mut attempts = 0;
            loop {
                let current = self
                    .get(name)
                    .ok_or_else(|| RegistryError::Unknown(name.to_string()))?;
                let configs = alter(&current.configs)?;
                validate_all(&configs)?;
                if validate_only {
                    return Ok(TopicInfo { configs, ..current });
                }
                let change = MetadataChange::SetConfigs {
                    name: name.to_string(),
                    expected: current.configs.clone(),
                    configs: configs.clone(),
                };
                match self.ask_controller(change).await {
                    Ok(()) => return Ok(TopicInfo { configs, ..current }),
                    // Another host's change won: wait for it here, then recompute.
                    Err(RegistryError::Cluster(MetadataError::Conflict(_))) if attempts < 5 => {
                        attempts += 1;
                        let seen = self.version();
                        let deadline = std::time::Instant::now() + PUBLISH_WAIT;
                        while self.version() == seen && std::time::Instant::now() < deadline {
                            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        self.change(name, validate_only, |current| {
            let configs = alter(&current.configs)?;
            validate_all(&configs)?;
            Ok(TopicInfo {
                configs,
                ..current.clone()
            })
        })
        .await
    }

    /// Replaces topic `name` with what `change` makes of it, durably: written as pending
    /// first, so a crash before the file's rename keeps the old topic and one after it the
    /// new, and readers see the new one only once durable.
    async fn change(
        self: &Arc<Self>,
        name: &str,
        validate_only: bool,
        change: impl FnOnce(&TopicInfo) -> Result<TopicInfo, RegistryError>,
    ) -> Result<TopicInfo, RegistryError> {
        let changed = {
            let mut s = self.state();
            if s.pending.contains_key(name) {
                return Err(RegistryError::InProgress(name.to_string()));
            }
            let current = s
                .cluster
                .topics
                .get(name)
                .ok_or_else(|| RegistryError::Unknown(name.to_string()))?;
            let changed = change(current)?;
            if validate_only {
                return Ok(changed);
            }
            s.pending.insert(name.to_string(), changed.clone());
            changed
        };
        let persisted = self.persist_replacing(name).await;
        let deleted = {
            let mut s = self.state();
            s.pending.remove(name);
            persisted?;
            let deleted = !s.cluster.topics.contains_key(name);
            if !deleted {
                s.cluster.topics.insert(name.to_string(), changed.clone());
                self.version.fetch_add(1, Ordering::AcqRel);
            }
            deleted
        };
        if deleted {
            // Deleted while changing: the file written above still held it.
            self.persist().await?;
            return Err(RegistryError::Unknown(name.to_string()));
        }
        Ok(changed)
    }

    /// Deletes a topic, durably.
    pub async fn delete(self: &Arc<Self>, name: &str) -> Result<TopicInfo, RegistryError> {
        if matches!(self.backend, Backend::Controller(_)) {
            let removed = self
                .get(name)
                .ok_or_else(|| RegistryError::Unknown(name.to_string()))?;
            self.ask_controller(MetadataChange::DeleteTopic(name.to_string()))
                .await?;
            return Ok(removed);
        }
        let removed = self
            .state()
            .cluster
            .topics
            .remove(name)
            .ok_or_else(|| RegistryError::Unknown(name.to_string()))?;
        self.version.fetch_add(1, Ordering::AcqRel);
        self.persist().await?;
        Ok(removed)
    }

    /// Writes the current topics (and those being created) to the registry file.
    async fn persist(self: &Arc<Self>) -> Result<(), RegistryError> {
        self.persist_replacing("").await
    }

    /// [`Self::persist`], with the pending version of topic `replaced` written instead of
    /// its current one (a topic being grown).
    async fn persist_replacing(self: &Arc<Self>, replaced: &str) -> Result<(), RegistryError> {
        let me = Arc::clone(self);
        let replaced = replaced.to_string();
        glommio::executor()
            .spawn_blocking(move || {
                let _writer = me.write.lock().unwrap_or_else(|p| p.into_inner());
                let file = {
                    let s = me.state();
                    RegistryFile {
                        topics: s
                            .cluster
                            .topics
                            .values()
                            .filter(|t| t.name != replaced)
                            .chain(s.pending.values())
                            .cloned()
                            .collect(),
                        security: s.cluster.security.clone(),
                    }
                };
                Ok(write_json(&me.path, &file)?)
            })
            .await
    }
}

impl TopicRegistry {
    /// A single host's shards as nodes (none on a cluster host, which never places).
    fn local_nodes(&self) -> Vec<NodeId> {
        match &self.backend {
            Backend::Local { host } => self
                .state()
                .cluster
                .hosts
                .get(host)
                .map(|h| h.nodes(*host).collect())
                .unwrap_or_default(),
            Backend::Controller(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_support::{run, test_dir};

    #[test]
    fn topics_grow_durably_and_never_shrink() {
        let dir = test_dir();
        let path = dir.path().to_path_buf();
        run(async move {
            let registry = TopicRegistry::load(&path, 0, one_host(2)).expect("load");
            let created = registry
                .create("orders", 2, 1, TopicConfigs::new())
                .await
                .expect("create");
            let before = registry.version();
            let checked = registry
                .add_partitions("orders", 5, true)
                .await
                .expect("validate only");
            assert_eq!(checked.partitions, 5);
            assert_eq!(registry.get("orders").map(|t| t.partitions), Some(2));
            assert_eq!(registry.version(), before, "validate_only changes nothing");
            let grown = registry
                .add_partitions("orders", 5, false)
                .await
                .expect("grow");
            assert_eq!((grown.partitions, grown.id), (5, created.id));
            assert!(registry.version() > before);
            assert!(matches!(
                registry.add_partitions("orders", 5, false).await,
                Err(RegistryError::CannotShrink { current: 5, .. })
            ));
            assert!(matches!(
                registry.add_partitions("missing", 3, false).await,
                Err(RegistryError::Unknown(_))
            ));
            assert_eq!(grown.placement.len(), 5);
            assert_eq!(grown.placement[..2], created.placement[..]);
            let reloaded = TopicRegistry::load(&path, 0, one_host(2)).expect("reload");
            assert_eq!(reloaded.get("orders"), Some(grown));
        });
    }

    fn one_host(shards: u32) -> HostRecord {
        HostRecord {
            advertise: "127.0.0.1".into(),
            port: 9092,
            tls_port: None,
            shards,
            incarnation: 0,
            fenced: false,
            draining: false,
        }
    }

    #[test]
    fn a_registry_without_placement_gets_the_placement_its_data_has() {
        let dir = test_dir();
        let legacy = r#"{"topics":[{"name":"orders","id":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"partitions":4}]}"#;
        std::fs::write(dir.path().join(REGISTRY_FILE), legacy).expect("write");
        let registry = TopicRegistry::load(dir.path(), 2, one_host(2)).expect("load");
        let placed = registry.get("orders").expect("topic").placement;
        // Before placement was stored, partition p lived on shard (crc(name) + p) % shards.
        let start = crc32c::crc32c(b"orders") as usize;
        let expected: Vec<NodeId> = (0..4)
            .map(|p| node_id(2, crate::metadata::placement::ShardId((start + p) % 2)))
            .collect();
        assert_eq!(placed, expected);
        assert_eq!(crate::metadata::placement::host_of(placed[0]), 2);
    }
}
