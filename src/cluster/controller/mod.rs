//! A voter of the controller quorum: its openraft node and the listener that serves
//! Raft's messages and the hosts' requests; the leader's sessions with the hosts (and
//! its fencing of silent ones) are in `sessions`, what it reports about the cluster in
//! `status`.
//!
//! Only the leader answers hosts (others say who leads): it checks each change against
//! the metadata, places new partitions over the live hosts' shards and commits the
//! change through Raft before it answers. Heartbeats are not logged: the leader keeps
//! the time of each host's last one in memory and commits only the change of state
//! (fenced after `session_timeout` of silence, unfenced on its next heartbeat), as
//! KRaft does. A new leader gives every host a full session timeout before fencing.

mod sessions;
mod status;
mod voters;

use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use openraft::{BasicNode, ServerState};
use tokio::net::{TcpListener, TcpStream};

use super::{
    config::{voters_text, ClusterConfig},
    network::Network,
    peer_tls::PeerTls,
    rpc::{
        read_frame, write_frame, Channel, Heartbeat, HeartbeatReply, Registration, Request,
        Response,
    },
    store::{Applied, LogStore, StateMachine, Store},
    Raft,
};
use crate::{
    metadata::{
        cluster_state::{
            Command, MetadataChange, MetadataError, OFFSETS_REPLICATION_FACTOR,
            OFFSETS_SEGMENT_BYTES, OFFSETS_TOPIC,
        },
        placement::{node_id, shard_of, COORDINATOR_SLOTS},
        topic_config::TopicConfigs,
    },
    replication::lag_report::PartitionLag,
};

/// Why a controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Its LMDB store could not be opened.
    #[error("controller store {path}: {source}")]
    Store {
        /// The directory.
        path: std::path::PathBuf,
        /// LMDB's error.
        #[source]
        source: heed::Error,
    },
    /// openraft refused to start.
    #[error("controller: {0}")]
    Raft(String),
    /// The controller listener could not be bound.
    #[error("controller listener {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
}

/// How long a change may wait for the quorum before the host is told it is unavailable.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a heartbeat is held waiting for newer metadata.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// A controller connection that sends nothing for this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How often the leader looks for hosts to fence (it bounds how late past its session
/// timeout a dead host is fenced).
const FENCE_CHECK: Duration = Duration::from_millis(100);

/// A voter that has not heard from its leader for a random time between the minimum and
/// the maximum election timeout stands for election; voters grant votes only once they
/// have not heard from their leader for the maximum (openraft's leader lease), so a dead
/// controller leader is replaced after between one and two maximums (a first candidate
/// usually asks too early). Six heartbeats in the minimum: enough for a loaded machine,
/// where a spurious election costs a moment of metadata changes, never data.
const ELECTION_TIMEOUT_MIN_MS: u64 = 600;
/// See [`ELECTION_TIMEOUT_MIN_MS`].
const ELECTION_TIMEOUT_MAX_MS: u64 = 900;

/// Leadership returns to preferred replicas once no host registered, was fenced or
/// came back for this long (Kafka's auto.leader.rebalance.enable, which checks every
/// 5 minutes; sooner here, since a returned host otherwise leads nothing for minutes).
const PREFERRED_LEADER_QUIET: Duration = Duration::from_secs(10);

/// One voter.
pub struct Controller {
    id: u64,
    raft: Raft,
    published: tokio::sync::watch::Receiver<Arc<Applied>>,
    config: ClusterConfig,
    heartbeats: Mutex<HashMap<u32, Instant>>,
    /// The lagging partitions each host last reported leading.
    lags: Mutex<HashMap<u32, Vec<PartitionLag>>>,
    /// The metadata version each host last said it has (DescribeQuorum's observers).
    known_versions: Mutex<HashMap<u32, u64>>,
    /// When a host last registered, was fenced or came back: preferred leaders return
    /// only after [`PREFERRED_LEADER_QUIET`] without such changes.
    membership_changed: Mutex<Instant>,
}

/// How long a peer has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// An accepted connection made ready for requests: TCP_NODELAY set and, with `tls`,
/// the handshake done — `None` (and a line in the log) for a peer that presented no
/// certificate the CA signed, or took too long.
async fn open(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    tls: Option<PeerTls>,
) -> Option<Box<dyn Channel>> {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "controller connection: no TCP_NODELAY");
    }
    let Some(tls) = tls else {
        return Some(Box::new(stream));
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
        Ok(Ok(stream)) => Some(Box::new(stream)),
        Ok(Err(e)) => {
            tracing::warn!(%peer, error = %e, "controller connection refused: its TLS handshake failed (a peer needs a certificate the controller CA signed)");
            None
        }
        Err(_) => {
            tracing::warn!(%peer, "controller connection refused: no TLS handshake within {HANDSHAKE_TIMEOUT:?}");
            None
        }
    }
}

impl Controller {
    /// Opens the store under `data_dir/controller`, starts the Raft node and, on a store
    /// that never was, proposes the voter list as the first membership (every voter does
    /// the same with the same list; Raft settles on one).
    pub async fn start(
        host: u32,
        config: &ClusterConfig,
        data_dir: &Path,
        tls: Option<PeerTls>,
    ) -> Result<Arc<Controller>, ControllerError> {
        let dir = data_dir.join("controller");
        let store = Store::open(&dir).map_err(|source| ControllerError::Store {
            path: dir.clone(),
            source,
        })?;
        let (tx, published) = tokio::sync::watch::channel(Arc::new(Applied::default()));
        let machine = StateMachine::open(store.clone(), Arc::new(tx))
            .map_err(|e| ControllerError::Raft(e.to_string()))?;
        let raft_config = openraft::Config {
            cluster_name: "weir".into(),
            heartbeat_interval: 100,
            election_timeout_min: ELECTION_TIMEOUT_MIN_MS,
            election_timeout_max: ELECTION_TIMEOUT_MAX_MS,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(1000),
            max_in_snapshot_log_to_keep: 100,
            ..Default::default()
        }
        .validate()
        .map_err(|e| ControllerError::Raft(e.to_string()))?;
        let id = u64::from(host);
        let raft = Raft::new(
            id,
            Arc::new(raft_config),
            Network { tls },
            LogStore(store),
            machine,
        )
        .await
        .map_err(|e| ControllerError::Raft(e.to_string()))?;
        let initialized = raft
            .is_initialized()
            .await
            .map_err(|e| ControllerError::Raft(e.to_string()))?;
        let founding = config.voters.iter().any(|v| v.id == host);
        if !initialized && !founding {
            tracing::info!(
                "this controller is not one of --controller-quorum-voters: it joins the quorum once `weir cluster add-voter` names it"
            );
        }
        if !initialized && founding {
            let members: BTreeMap<u64, BasicNode> = config
                .voters
                .iter()
                .map(|v| (u64::from(v.id), BasicNode::new(v.addr.to_string())))
                .collect();
            if let Err(e) = raft.initialize(members).await {
                tracing::debug!(error = %e, "controller quorum already initialised");
            }
        }
        Ok(Arc::new(Controller {
            id,
            raft,
            published,
            config: config.clone(),
            heartbeats: Mutex::new(HashMap::new()),
            lags: Mutex::new(HashMap::new()),
            known_versions: Mutex::new(HashMap::new()),
            membership_changed: Mutex::new(Instant::now()),
        }))
    }

    /// Serves the controller listener until the runtime stops; with `tls`, only to
    /// peers whose certificate the CA signed.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, tls: Option<PeerTls>) {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let me = Arc::clone(&self);
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        if let Some(stream) = open(stream, peer, tls).await {
                            me.connection(stream).await;
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "controller accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Stops the Raft node.
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "controller did not stop cleanly");
        }
    }

    async fn connection(self: Arc<Self>, mut stream: Box<dyn Channel>) {
        loop {
            // Voters talk every heartbeat interval and hosts every poll interval: a
            // connection silent for a minute is gone (or never was a peer).
            let request = match tokio::time::timeout(
                IDLE_TIMEOUT,
                read_frame::<Request>(&mut stream),
            )
            .await
            {
                Ok(Ok(Some(r))) => r,
                Ok(Ok(None)) => return,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "controller connection closed on a bad frame");
                    return;
                }
                Err(_) => {
                    tracing::debug!(
                        "controller connection closed after {IDLE_TIMEOUT:?} of silence"
                    );
                    return;
                }
            };
            let response = self.handle(request).await;
            if write_frame(&mut stream, &response).await.is_err() {
                return;
            }
        }
    }

    async fn handle(&self, request: Request) -> Response {
        match request {
            Request::AppendEntries(r) => Response::AppendEntries(self.raft.append_entries(r).await),
            Request::Vote(r) => Response::Vote(self.raft.vote(r).await),
            Request::InstallSnapshot(r) => {
                Response::InstallSnapshot(self.raft.install_snapshot(r).await)
            }
            Request::Register(r) => Response::Registered(self.register(r).await),
            Request::Heartbeat(h) => Response::Heartbeat(self.heartbeat(h).await),
            Request::Change(c) => Response::Changed(self.change(c).await),
            Request::Status => Response::Status(self.status()),
            Request::AddVoter { id, address } => {
                Response::VotersChanged(self.add_voter(id, address).await)
            }
            Request::RemoveVoter { id } => Response::VotersChanged(self.remove_voter(id).await),
        }
    }

    /// The quorum as this voter's Raft node reports it, updated on every change.
    pub fn quorum(&self) -> tokio::sync::watch::Receiver<super::QuorumMetrics> {
        self.raft.metrics()
    }

    fn applied(&self) -> Arc<Applied> {
        Arc::clone(&self.published.borrow())
    }

    fn is_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.id)
    }

    /// `Ok` on the leader; otherwise where the leader is.
    fn leader_only(&self) -> Result<(), MetadataError> {
        if self.is_leader() {
            return Ok(());
        }
        let m = self.raft.metrics();
        let m = m.borrow();
        let leader = m
            .current_leader
            .and_then(|l| m.membership_config.membership().get_node(&l).cloned())
            .map(|n| n.addr);
        Err(MetadataError::NotLeader { leader })
    }

    /// Commits `cmd` and returns its log index once applied here.
    async fn propose(&self, cmd: Command) -> Result<u64, MetadataError> {
        match tokio::time::timeout(COMMIT_TIMEOUT, self.raft.client_write(cmd)).await {
            Err(_) => Err(MetadataError::Unavailable(format!(
                "no majority of the voters committed the change within {COMMIT_TIMEOUT:?}"
            ))),
            Ok(Err(e)) => match e.forward_to_leader::<BasicNode>() {
                Some(f) => Err(MetadataError::NotLeader {
                    leader: f.leader_node.as_ref().map(|n| n.addr.clone()),
                }),
                None => Err(MetadataError::Unavailable(e.to_string())),
            },
            Ok(Ok(r)) => r.data.map(|()| r.log_id.index),
        }
    }

    async fn register(&self, r: Registration) -> Result<String, MetadataError> {
        self.leader_only()?;
        let ours = voters_text(&self.config.voters);
        if r.voters != ours {
            let why = format!(
                "host {} was started with --controller-quorum-voters {} but the quorum is {ours}",
                r.host, r.voters
            );
            tracing::warn!(host = r.host, "{why}");
            return Err(MetadataError::Refused(why));
        }
        let applied = self.applied();
        let state = &applied.state;
        if let Some(theirs) = &r.cluster_id {
            if !state.cluster_id.is_empty() && *theirs != state.cluster_id {
                let why = format!(
                    "host {}'s data directory belongs to cluster {theirs}; this is cluster {}",
                    r.host, state.cluster_id
                );
                tracing::warn!(host = r.host, "{why}");
                return Err(MetadataError::Refused(why));
            }
        }
        if let Some(existing) = state.hosts.get(&r.host) {
            let elsewhere =
                existing.advertise != r.record.advertise || existing.port != r.record.port;
            let live = !existing.fenced && self.heard_within(r.host, self.config.session_timeout);
            if live && elsewhere && existing.incarnation != r.record.incarnation {
                let why = format!(
                    "node id {} is taken by the live host at {}:{}",
                    r.host, existing.advertise, existing.port
                );
                tracing::warn!(host = r.host, "{why}");
                return Err(MetadataError::Refused(why));
            }
        }
        if state.cluster_id.is_empty() {
            let id = r.cluster_id.clone().unwrap_or_else(new_cluster_id);
            self.propose(Command::SetClusterId(id)).await?;
        }
        let mut record = r.record.clone();
        record.fenced = false;
        self.propose(Command::RegisterHost {
            host: r.host,
            record,
        })
        .await?;
        self.membership_changed();
        self.heard(r.host);
        for mut topic in r.legacy_topics {
            if self.applied().state.topics.contains_key(&topic.name) {
                tracing::warn!(host = r.host, topic = %topic.name, "a topic of that name exists; the host's copy is not imported");
                continue;
            }
            let nodes: Vec<_> = r.record.nodes(r.host).collect();
            if topic.placement.len() != topic.partitions as usize {
                topic.placement =
                    crate::metadata::placement::place(&nodes, &topic.name, 0..topic.partitions);
            }
            for n in &mut topic.placement {
                *n = node_id(r.host, shard_of(*n));
            }
            // One replica each, where the placement says (recomputed from it).
            topic.states.clear();
            tracing::info!(host = r.host, topic = %topic.name, "imported a single-host topic");
            match self.propose(Command::CreateTopic(topic)).await {
                Ok(_) | Err(MetadataError::AlreadyExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
        tracing::info!(host = r.host, advertise = %r.record.advertise, port = r.record.port, shards = r.record.shards, "host registered");
        Ok(self.applied().state.cluster_id.clone())
    }

    async fn heartbeat(&self, h: Heartbeat) -> Result<HeartbeatReply, MetadataError> {
        self.leader_only()?;
        let fenced = {
            let applied = self.applied();
            let Some(record) = applied
                .state
                .hosts
                .get(&h.host)
                .filter(|r| r.incarnation == h.incarnation)
            else {
                tracing::info!(
                    host = h.host,
                    "heartbeat from an unregistered host (or an old process of it) refused"
                );
                return Err(MetadataError::NotRegistered(h.host));
            };
            record.fenced
        };
        self.heard(h.host);
        self.known_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(h.host, h.known_version);
        self.lags
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(h.host, h.lagging);
        if h.shutting_down {
            if !fenced {
                tracing::info!(
                    host = h.host,
                    "controlled shutdown: fencing the host so its leadership moves now"
                );
                self.propose(Command::SetFenced {
                    host: h.host,
                    fenced: true,
                })
                .await?;
                self.membership_changed();
            }
        } else if fenced {
            tracing::info!(host = h.host, "host is back: unfenced");
            self.propose(Command::SetFenced {
                host: h.host,
                fenced: false,
            })
            .await?;
            self.membership_changed();
        }
        let mut watch = self.published.clone();
        if watch.borrow_and_update().version() <= h.known_version {
            // Nothing new: hold the heartbeat until something is, or the interval ends.
            let _ = tokio::time::timeout(POLL_INTERVAL, watch.changed()).await;
        }
        let applied = self.applied();
        let version = applied.version();
        Ok(HeartbeatReply {
            version,
            state: (version > h.known_version).then(|| applied.state.clone()),
            leader: self.id as u32,
        })
    }

    async fn change(&self, change: MetadataChange) -> Result<u64, MetadataError> {
        self.leader_only()?;
        let applied = self.applied();
        let state = &applied.state;
        let nodes = state.placeable_nodes();
        let ensuring = matches!(change, MetadataChange::EnsureCoordinators);
        let cmd = match change {
            MetadataChange::CreateTopic {
                name,
                partitions,
                replication_factor,
                configs,
            } => {
                if state.topics.contains_key(&name) {
                    return Err(MetadataError::AlreadyExists(name));
                }
                if nodes.is_empty() {
                    return Err(MetadataError::NoBrokers);
                }
                Command::CreateTopic(state.new_topic(
                    &name,
                    partitions,
                    replication_factor,
                    configs,
                    0,
                )?)
            }
            MetadataChange::DeleteTopic(name) => Command::DeleteTopic(name),
            MetadataChange::AddPartitions { name, partitions } => {
                let t = state
                    .topics
                    .get(&name)
                    .ok_or_else(|| MetadataError::Unknown(name.clone()))?;
                if partitions <= t.partitions {
                    return Err(MetadataError::CannotShrink {
                        topic: name,
                        current: t.partitions,
                        asked: partitions,
                    });
                }
                if nodes.is_empty() {
                    return Err(MetadataError::NoBrokers);
                }
                let added =
                    crate::metadata::placement::place(&nodes, &name, t.partitions..partitions);
                let states =
                    state.replica_states(&added, &state.live_hosts(), t.replication_factor())?;
                let mut placement = t.placement.clone();
                placement.extend(added);
                Command::AddPartitions {
                    name,
                    placement,
                    states,
                }
            }
            MetadataChange::SetConfigs {
                name,
                expected,
                configs,
            } => Command::SetConfigs {
                name,
                expected,
                configs,
            },
            MetadataChange::EnsureCoordinators => {
                // A cluster from before the journal keeps its table.
                if !state.coordinators.is_empty() || state.topics.contains_key(OFFSETS_TOPIC) {
                    return Ok(applied.version());
                }
                if nodes.is_empty() {
                    return Err(MetadataError::NoBrokers);
                }
                // The offsets journal, placed and replicated like any topic; its
                // partitions' leaders coordinate the groups. Never cut by retention:
                // its snapshots keep it to its live state (group::journal_snapshot),
                // freeing a segment at a time.
                let rf = state.live_hosts().len().min(OFFSETS_REPLICATION_FACTOR);
                let mut configs = TopicConfigs::new();
                configs.insert("retention.ms".into(), "-1".into());
                configs.insert("segment.bytes".into(), OFFSETS_SEGMENT_BYTES.to_string());
                Command::CreateTopic(state.new_topic(
                    OFFSETS_TOPIC,
                    COORDINATOR_SLOTS as u32,
                    rf,
                    configs,
                    0,
                )?)
            }
            MetadataChange::AlterIsr {
                topic,
                partition,
                leader_epoch,
                isr,
            } => Command::AlterIsr {
                topic,
                partition,
                leader_epoch,
                isr,
            },
            MetadataChange::PreferLeaders => Command::PreferLeaders,
            MetadataChange::Security(change) => Command::Security(change),
            MetadataChange::Drain {
                host,
                draining,
                reassign,
            } => {
                if !state.hosts.contains_key(&host) {
                    return Err(MetadataError::NotRegistered(host));
                }
                tracing::info!(host, draining, reassign, "drain");
                Command::SetDraining {
                    host,
                    draining,
                    reassign,
                }
            }
            MetadataChange::ElectLeaders {
                partitions,
                unclean,
            } => Command::ElectLeaders {
                partitions,
                unclean,
            },
            MetadataChange::Reassign { moves } => Command::Reassign { moves },
            MetadataChange::SetBrokerThrottles { node, set } => {
                Command::SetBrokerThrottles { node, set }
            }
        };
        match self.propose(cmd).await {
            // Two hosts asked at once (both saw no table): the first one's journal topic
            // is the table, which is all either wanted.
            Err(MetadataError::AlreadyExists(name)) if ensuring && name == OFFSETS_TOPIC => {
                Ok(self.applied().version())
            }
            outcome => outcome,
        }
    }
}

/// A fresh cluster id: 16 hex digits of time and 8 of the process and a counter.
fn new_cluster_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let salt = crc32c::crc32c(&(u64::from(std::process::id()) ^ nanos).to_le_bytes());
    format!("{nanos:016x}{salt:08x}")
}
