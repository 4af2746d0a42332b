//! The controller thread: one OS thread with a single-threaded tokio runtime (openraft's)
//! that runs this host's voter, if it is one, and its agent, if it is a broker. It
//! never touches a shard's reactor; shards reach it only through the registry's
//! [`ControllerLink`](crate::metadata::controller_link::ControllerLink) and see its work only
//! as installed metadata.

use std::{path::PathBuf, sync::Arc, thread::JoinHandle};

use tokio::sync::mpsc::UnboundedReceiver;

use super::{
    agent::{Agent, AgentError, ShutdownHandle},
    config::ClusterConfig,
    controller::{Controller, ControllerError},
    peer_tls::{PeerTls, PeerTlsFiles},
};
use crate::{
    metadata::{
        cluster_state::HostRecord, controller_link::ControllerCall, registry::TopicRegistry,
    },
    metrics::ControllerMetrics,
    replication::lag_report::ReplicaLags,
};

/// Why the cluster side of a host failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The voter could not start.
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// The agent stopped the host (refused, or its identity is wrong).
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The thread or its runtime could not start.
    #[error("controller thread: {0}")]
    Thread(std::io::Error),
    /// The controller channel's certificates could not be loaded.
    #[error("controller TLS: {0}")]
    Tls(#[from] crate::security::tls::TlsError),
    /// The thread ended before the host was registered.
    #[error("the controller thread stopped before this host registered")]
    Stopped,
}

/// The broker half of a host, for its agent.
pub struct BrokerSide {
    /// The host's registration.
    pub record: HostRecord,
    /// Where published metadata goes.
    pub registry: Arc<TopicRegistry>,
    /// The shards' metadata changes.
    pub calls: UnboundedReceiver<ControllerCall>,
    /// How the host asks for a controlled shutdown.
    pub shutdown: ShutdownHandle,
    /// What the host's leaders report of their followers' lag.
    pub lags: Arc<ReplicaLags>,
}

/// The running controller thread.
pub struct ControllerThread {
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    /// Reports once: `Ok` when the host is registered and has metadata (at once for a
    /// voter without the broker role), or why it cannot serve.
    pub ready: std::sync::mpsc::Receiver<Result<(), ClusterError>>,
}

impl ControllerThread {
    /// Starts the thread: the voter (if `config.roles.controller`), which keeps
    /// `quorum` up with the quorum's leader, and the agent (if `broker` is given).
    pub fn start(
        host: u32,
        config: ClusterConfig,
        data_dir: PathBuf,
        broker: Option<BrokerSide>,
        quorum: ControllerMetrics,
    ) -> Result<ControllerThread, ClusterError> {
        let tls = config.tls.as_ref().map(PeerTlsFiles::load).transpose()?;
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ClusterError::Thread)?;
        let thread = std::thread::Builder::new()
            .name("controller".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let controller = if config.roles.controller {
                        match start_voter(host, &config, &data_dir, tls.clone()).await {
                            Ok(c) => {
                                tokio::spawn(watch_quorum(Arc::clone(&c), u64::from(host), quorum));
                                Some(c)
                            }
                            Err(e) => {
                                let _ = ready_tx.send(Err(e));
                                return;
                            }
                        }
                    } else {
                        None
                    };
                    match broker {
                        Some(b) => {
                            let agent = Agent {
                                host,
                                record: b.record,
                                config,
                                registry: b.registry,
                                data_dir,
                                leader: std::sync::Mutex::new(None),
                                shutdown: b.shutdown,
                                lags: b.lags,
                                tls,
                            };
                            let (tx, rx) = std::sync::mpsc::channel::<Result<(), AgentError>>();
                            let relay = ready_tx.clone();
                            tokio::spawn(agent.run(b.calls, tx));
                            tokio::task::spawn_blocking(move || {
                                let answer = rx.recv().unwrap_or(Err(AgentError::Refused(
                                    crate::metadata::cluster_state::MetadataError::Unavailable(
                                        "the agent stopped".into(),
                                    ),
                                )));
                                let _ = relay.send(answer.map_err(ClusterError::from));
                            });
                        }
                        None => {
                            let _ = ready_tx.send(Ok(()));
                        }
                    }
                    let _ = stopped.wait_for(|s| *s).await;
                    if let Some(c) = controller {
                        c.shutdown().await;
                    }
                });
            })
            .map_err(ClusterError::Thread)?;
        Ok(ControllerThread {
            stop,
            thread: Some(thread),
            ready,
        })
    }

    /// Stops the voter and the agent and waits for the thread.
    pub fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("the controller thread panicked");
            }
        }
    }
}

async fn start_voter(
    host: u32,
    config: &ClusterConfig,
    data_dir: &std::path::Path,
    tls: Option<PeerTls>,
) -> Result<Arc<Controller>, ClusterError> {
    let controller = Controller::start(host, config, data_dir, tls.clone()).await?;
    let addr = config.controller_listen;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ControllerError::Listen { addr, source })?;
    tracing::info!(host, %addr, "controller listening");
    tokio::spawn(Arc::clone(&controller).serve(listener, tls));
    tokio::spawn(Arc::clone(&controller).fence_silent_hosts());
    Ok(controller)
}

/// Keeps `metrics` up with the quorum's leader as voter `me` sees it and, while it
/// leads, with the partitions that have no leader (checked every second), until the
/// voter stops.
async fn watch_quorum(controller: Arc<Controller>, me: u64, metrics: ControllerMetrics) {
    let mut quorum = controller.quorum();
    let mut last = None;
    loop {
        let now = quorum.borrow_and_update().current_leader;
        metrics.observe_leader(me, last, now);
        metrics.set_offline(controller.offline_partitions());
        last = now.or(last);
        tokio::select! {
            changed = quorum.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
        }
    }
}
