//! The topic registry: every topic's name, id and partition count, shared by all shards
//! and persisted in `topics.json` in the data directory.
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

use serde::{Deserialize, Serialize};

use super::topic_config::{validate_all, ConfigError, TopicConfigs};

/// File name of the registry inside the data directory.
pub const REGISTRY_FILE: &str = "topics.json";

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    /// The topic's name.
    pub name: String,
    /// Kafka's topic id, assigned at creation and never reused.
    pub id: [u8; 16],
    /// Number of partitions.
    pub partitions: u32,
    /// The topic's config overrides (see `metadata::topic_config`); absent in registries
    /// written before topics had configs.
    #[serde(default)]
    pub configs: TopicConfigs,
}

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
    /// The registry file could not be written or read.
    #[error("topic registry {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The registry file is not valid JSON of the expected shape.
    #[error("topic registry {path} is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Default)]
struct State {
    topics: BTreeMap<String, TopicInfo>,
    pending: BTreeMap<String, TopicInfo>,
}

/// The shared topic registry. `Send + Sync`: one per broker.
pub struct TopicRegistry {
    path: PathBuf,
    state: Mutex<State>,
    /// Serialises file writes; held only by blocking-pool threads.
    write: Mutex<()>,
    version: AtomicU64,
}

#[derive(Serialize, Deserialize)]
struct RegistryFile {
    topics: Vec<TopicInfo>,
}

impl TopicRegistry {
    /// Loads the registry from `data_dir`, or starts an empty one. Blocking: call at
    /// start-up, before the shards run.
    pub fn load(data_dir: &Path) -> Result<Arc<TopicRegistry>, RegistryError> {
        let path = data_dir.join(REGISTRY_FILE);
        let mut state = State::default();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let file: RegistryFile =
                    serde_json::from_slice(&bytes).map_err(|e| RegistryError::Corrupt {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?;
                for t in file.topics {
                    state.topics.insert(t.name.clone(), t);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(RegistryError::Io { path, source }),
        }
        Ok(Arc::new(TopicRegistry {
            path,
            state: Mutex::new(state),
            write: Mutex::new(()),
            version: AtomicU64::new(1),
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the map half-changed (every
        // change is one insert or remove), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes whenever a topic is created or deleted.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The topic called `name`.
    pub fn get(&self, name: &str) -> Option<TopicInfo> {
        self.state().topics.get(name).cloned()
    }

    /// Every topic, by name.
    pub fn list(&self) -> Vec<TopicInfo> {
        self.state().topics.values().cloned().collect()
    }

    /// Creates a topic with `partitions` partitions and a fresh id, durably, then makes
    /// it visible.
    pub async fn create(
        self: &Arc<Self>,
        name: &str,
        partitions: u32,
        configs: TopicConfigs,
    ) -> Result<TopicInfo, RegistryError> {
        let info = TopicInfo {
            name: name.to_string(),
            id: fresh_id(name),
            partitions,
            configs,
        };
        {
            let mut s = self.state();
            if s.topics.contains_key(name) || s.pending.contains_key(name) {
                return Err(RegistryError::AlreadyExists(name.to_string()));
            }
            s.pending.insert(name.to_string(), info.clone());
        }
        let persisted = self.persist().await;
        let mut s = self.state();
        s.pending.remove(name);
        persisted?;
        s.topics.insert(name.to_string(), info.clone());
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
        self.change(name, validate_only, |current| {
            if partitions <= current.partitions {
                return Err(RegistryError::CannotShrink {
                    topic: name.to_string(),
                    current: current.partitions,
                    asked: partitions,
                });
            }
            Ok(TopicInfo {
                partitions,
                ..current.clone()
            })
        })
        .await
    }

    /// Replaces a topic's config overrides with what `alter` makes of the current ones,
    /// checked (`topic_config::validate_all`), durably, then makes them visible; shards
    /// apply them to the open partitions at their next look at the registry. `alter`
    /// sees the overrides as they are under the registry's lock, so two changes never
    /// lose one another. With `validate_only`, changes nothing.
    pub async fn alter_configs(
        self: &Arc<Self>,
        name: &str,
        validate_only: bool,
        alter: impl FnOnce(&TopicConfigs) -> Result<TopicConfigs, ConfigError>,
    ) -> Result<TopicInfo, RegistryError> {
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
            let deleted = !s.topics.contains_key(name);
            if !deleted {
                s.topics.insert(name.to_string(), changed.clone());
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
        let removed = self
            .state()
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
                let topics: Vec<TopicInfo> = {
                    let s = me.state();
                    s.topics
                        .values()
                        .filter(|t| t.name != replaced)
                        .chain(s.pending.values())
                        .cloned()
                        .collect()
                };
                let bytes = serde_json::to_vec_pretty(&RegistryFile { topics }).map_err(|e| {
                    RegistryError::Corrupt {
                        path: me.path.clone(),
                        reason: e.to_string(),
                    }
                })?;
                write_atomically(&me.path, &bytes).map_err(|source| RegistryError::Io {
                    path: me.path.clone(),
                    source,
                })
            })
            .await
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_data()?;
    std::fs::rename(&tmp, path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir)?.sync_all()
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
    use crate::storage::test_support::{run, test_dir};

    #[test]
    fn topics_grow_durably_and_never_shrink() {
        let dir = test_dir();
        let path = dir.path().to_path_buf();
        run(async move {
            let registry = TopicRegistry::load(&path).expect("load");
            let created = registry
                .create("orders", 2, TopicConfigs::new())
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
            let reloaded = TopicRegistry::load(&path).expect("reload");
            assert_eq!(reloaded.get("orders"), Some(grown));
        });
    }
}
