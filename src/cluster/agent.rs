//! A host's side of the cluster: registers with the controller leader, heartbeats
//! (each heartbeat long-polls for newer metadata, which it installs in the host's
//! registry) and forwards the shards' metadata changes to the leader. Whichever voter
//! it reaches says where the leader is; an unreachable one is skipped.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedReceiver;

use super::{
    config::{voters_text, ClusterConfig},
    controller::POLL_INTERVAL,
    peer_tls::PeerTls,
    rpc::{self, Heartbeat, Registration, Request, Response},
};
use crate::{
    metadata::{
        cluster_state::{ClusterState, HostRecord, MetadataError},
        controller_link::ControllerCall,
        placement::{node_id, NodeId, ShardId},
        registry::{RegistryError, TopicRegistry},
        registry_files::{read_json, write_json, FileError},
    },
    replication::lag_report::ReplicaLags,
};

/// The file that ties a data directory to the cluster it joined.
pub const IDENTITY_FILE: &str = "cluster.json";

/// How long a forwarded change may take, retries included.
const CHANGE_DEADLINE: Duration = Duration::from_secs(10);

/// What a data directory remembers of its cluster (Kafka's `meta.properties`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The cluster it joined.
    pub cluster_id: String,
    /// The node id it joined as.
    pub node_id: u32,
}

/// Why the agent stopped the host.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The controller refused this host.
    #[error(transparent)]
    Refused(MetadataError),
    /// The data directory was joined under another node id.
    #[error("data directory {dir} belongs to node {theirs}, not {ours}")]
    NodeId {
        /// The directory.
        dir: PathBuf,
        /// Its node id.
        theirs: u32,
        /// The one given.
        ours: u32,
    },
    /// The identity file or the registry could not be read or written.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The identity file could not be read or written.
    #[error(transparent)]
    Identity(#[from] FileError),
}

/// One host's agent.
pub struct Agent {
    /// This host's node id.
    pub host: u32,
    /// Its registration.
    pub record: HostRecord,
    /// Its cluster settings.
    pub config: ClusterConfig,
    /// Its registry, where published metadata is installed.
    pub registry: Arc<TopicRegistry>,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// The controller leader's address as last seen, so forwarded changes go straight
    /// to it.
    pub leader: std::sync::Mutex<Option<String>>,
    /// Controlled shutdown: set when the host is to stop; the agent sets `released` once
    /// the controller has fenced it and the metadata saying so is installed.
    pub shutdown: ShutdownHandle,
    /// What the host's leaders report of their followers' lag.
    pub lags: Arc<ReplicaLags>,
    /// The controller channel's TLS, if the hosts have certificates.
    pub tls: Option<PeerTls>,
}

/// The two sides of a controlled shutdown: asked by the host's main thread, done by its
/// agent. Cloned into both.
#[derive(Debug, Clone, Default)]
pub struct ShutdownHandle {
    asked: Arc<std::sync::atomic::AtomicBool>,
    released: Arc<std::sync::atomic::AtomicBool>,
}

impl ShutdownHandle {
    /// Asks the agent for a controlled shutdown and waits until the controller has
    /// moved this host's leadership away and the host knows it, or `within` passes.
    /// True when it was released in time.
    pub fn shut_down(&self, within: Duration) -> bool {
        use std::sync::atomic::Ordering;
        self.asked.store(true, Ordering::Release);
        let deadline = Instant::now() + within;
        while !self.released.load(Ordering::Acquire) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    fn asked(&self) -> bool {
        self.asked.load(std::sync::atomic::Ordering::Acquire)
    }

    fn release(&self) {
        self.released
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

/// The voters in turn, starting with the leader when one was named, each with its
/// connection kept between calls.
struct Voters {
    addrs: Vec<String>,
    tls: Option<PeerTls>,
    next: usize,
    hint: Option<String>,
    clients: HashMap<String, rpc::Client>,
}

impl Voters {
    fn new(config: &ClusterConfig, tls: Option<PeerTls>) -> Voters {
        Voters {
            addrs: config.voters.iter().map(|v| v.addr.to_string()).collect(),
            tls,
            next: 0,
            hint: None,
            clients: HashMap::new(),
        }
    }

    fn client(&mut self, addr: &str) -> &mut rpc::Client {
        self.clients
            .entry(addr.to_string())
            .or_insert_with(|| rpc::Client::new(addr, self.tls.clone()))
    }

    fn pick(&mut self) -> String {
        if let Some(h) = self.hint.take() {
            return h;
        }
        let addr = self.addrs[self.next % self.addrs.len()].clone();
        self.next += 1;
        addr
    }
}

/// Calls the controller leader with `request`, following redirections and skipping
/// unreachable voters, until it answers with something other than "not the leader" or
/// `deadline` passes.
async fn call_leader(
    voters: &mut Voters,
    request: &Request,
    deadline: Instant,
) -> Result<Response, MetadataError> {
    loop {
        let addr = voters.pick();
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(MetadataError::Unavailable(
                "no controller leader answered in time".into(),
            ));
        }
        let answer = voters
            .client(&addr)
            .call(request, left.min(Duration::from_secs(3)))
            .await;
        match answer {
            Ok(response) => match not_leader(&response) {
                Some(Some(leader)) => voters.hint = Some(leader),
                Some(None) => {
                    // An election is under way: give it a moment.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                None => {
                    // Keep talking to the voter that answered.
                    voters.hint = Some(addr);
                    return Ok(response);
                }
            },
            Err(e) => {
                tracing::debug!(controller = %addr, error = %e, "controller unreachable");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// `Some(leader hint)` when the response says "not the leader".
fn not_leader(response: &Response) -> Option<Option<String>> {
    let e = match response {
        Response::Registered(Err(e)) => e,
        Response::Heartbeat(Err(e)) => e,
        Response::Changed(Err(e)) => e,
        Response::Status(Err(e)) => e,
        _ => return None,
    };
    match e {
        MetadataError::NotLeader { leader } => Some(leader.clone()),
        _ => None,
    }
}

/// The node Metadata names as controller: shard 0 of the leader's host when it is a
/// broker, else of the first live host.
fn controller_node(state: &ClusterState, leader: u32) -> Option<NodeId> {
    let host = if state.hosts.contains_key(&leader) {
        Some(leader)
    } else {
        state
            .hosts
            .iter()
            .find(|(_, h)| !h.fenced)
            .map(|(id, _)| *id)
    };
    host.map(|h| node_id(h, ShardId(0)))
}

impl Agent {
    /// Registers (retrying until a leader answers), then tells `ready` once the first
    /// metadata is installed, then heartbeats and forwards `calls` until the runtime
    /// stops. A refusal is reported on `ready` and ends the agent.
    pub async fn run(
        self,
        calls: UnboundedReceiver<ControllerCall>,
        ready: std::sync::mpsc::Sender<Result<(), AgentError>>,
    ) {
        let me = Arc::new(self);
        let registered = match me.register_until_answered().await {
            Ok(id) => id,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        tracing::info!(host = me.host, cluster = %registered, "registered with the controller");
        tokio::spawn(Arc::clone(&me).forward(calls));
        me.heartbeat_forever(ready).await;
    }

    async fn register_until_answered(&self) -> Result<String, AgentError> {
        let identity: Option<Identity> = read_json(&self.data_dir.join(IDENTITY_FILE))?;
        if let Some(id) = &identity {
            if id.node_id != self.host {
                return Err(AgentError::NodeId {
                    dir: self.data_dir.clone(),
                    theirs: id.node_id,
                    ours: self.host,
                });
            }
        }
        let legacy_topics = match identity {
            Some(_) => Vec::new(),
            None => TopicRegistry::legacy_topics(&self.data_dir)?,
        };
        let request = Request::Register(Registration {
            host: self.host,
            record: self.record.clone(),
            cluster_id: identity.as_ref().map(|i| i.cluster_id.clone()),
            voters: voters_text(&self.config.voters),
            legacy_topics,
        });
        let mut voters = Voters::new(&self.config, self.tls.clone());
        loop {
            let far = Instant::now() + Duration::from_secs(3600);
            let cluster_id = match call_leader(&mut voters, &request, far).await {
                Ok(Response::Registered(Ok(id))) => id,
                Ok(Response::Registered(Err(e @ MetadataError::Refused(_)))) => {
                    return Err(AgentError::Refused(e))
                }
                other => {
                    tracing::info!(result = ?other.map(|_| ()), "registration not answered yet; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            if identity.is_none() {
                let identity = Identity {
                    cluster_id: cluster_id.clone(),
                    node_id: self.host,
                };
                write_json(&self.data_dir.join(IDENTITY_FILE), &identity)?;
            }
            return Ok(cluster_id);
        }
    }

    async fn heartbeat_forever(
        self: Arc<Self>,
        ready: std::sync::mpsc::Sender<Result<(), AgentError>>,
    ) {
        let mut voters = Voters::new(&self.config, self.tls.clone());
        let mut ready = Some(ready);
        loop {
            let shutting_down = self.shutdown.asked();
            let request = Request::Heartbeat(Heartbeat {
                host: self.host,
                incarnation: self.record.incarnation,
                known_version: self.registry.version(),
                shutting_down,
                lagging: self.lags.snapshot(),
            });
            let deadline = Instant::now() + POLL_INTERVAL * 4;
            match call_leader(&mut voters, &request, deadline).await {
                Ok(Response::Heartbeat(Ok(reply))) => {
                    *self.leader.lock().unwrap_or_else(|p| p.into_inner()) = voters.hint.clone();
                    if let Some(state) = reply.state {
                        let controller = controller_node(&state, reply.leader);
                        if let Err(e) = self.registry.install(state, reply.version, controller) {
                            // The same metadata comes back at once: do not spin on a
                            // failing disk.
                            tracing::error!(error = %e, "cannot install cluster metadata");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            continue;
                        }
                    }
                    if let Some(r) = ready.take() {
                        let _ = r.send(Ok(()));
                    }
                    if shutting_down && self.registry_says_fenced() {
                        self.shutdown.release();
                    }
                }
                Ok(Response::Heartbeat(Err(MetadataError::NotRegistered(_)))) => {
                    tracing::warn!(
                        host = self.host,
                        "the controller does not know this host; registering again"
                    );
                    if let Err(e) = self.register_until_answered().await {
                        tracing::error!(error = %e, "registration refused");
                        if let Some(r) = ready.take() {
                            let _ = r.send(Err(e));
                        }
                        return;
                    }
                }
                other => {
                    tracing::debug!(result = ?other.map(|_| ()), "heartbeat not answered");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// True when the installed metadata has this host fenced.
    fn registry_says_fenced(&self) -> bool {
        self.registry
            .cluster()
            .hosts
            .get(&self.host)
            .is_some_and(|h| h.fenced)
    }

    async fn forward(self: Arc<Self>, mut calls: UnboundedReceiver<ControllerCall>) {
        while let Some(call) = calls.recv().await {
            let me = Arc::clone(&self);
            tokio::spawn(async move {
                let mut voters = Voters::new(&me.config, me.tls.clone());
                voters.hint = me.leader.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let deadline = Instant::now() + CHANGE_DEADLINE;
                let unexpected = |other: &Response| {
                    MetadataError::Unavailable(rpc::unexpected(other).to_string())
                };
                match call {
                    ControllerCall::Change { change, reply } => {
                        let request = Request::Change(change);
                        let answer = match call_leader(&mut voters, &request, deadline).await {
                            Ok(Response::Changed(r)) => r,
                            Ok(other) => Err(unexpected(&other)),
                            Err(e) => Err(e),
                        };
                        let _ = reply.send(answer);
                    }
                    ControllerCall::Quorum { reply } => {
                        let answer =
                            match call_leader(&mut voters, &Request::Status, deadline).await {
                                Ok(Response::Status(r)) => r.map(|status| status.quorum),
                                Ok(other) => Err(unexpected(&other)),
                                Err(e) => Err(e),
                            };
                        let _ = reply.send(answer);
                    }
                }
            });
        }
    }
}
