//! The broker's boot: what `weir serve` runs. It opens what the host's shards share
//! (the topic registry, producer ids, the LMDB store, the metrics endpoint), starts the
//! controller thread on a cluster host, then one pinned executor per shard, each of
//! which starts its [`shard`](crate::shard) and serves its [`listener`]; on stop, the
//! controlled shutdown and the shards' close. It sits above every layer it starts.

use std::{
    rc::Rc,
    sync::{atomic::AtomicBool, Arc},
};

use glommio::{LocalExecutorBuilder, Placement};

use crate::{
    cluster::{
        agent::ShutdownHandle,
        runtime::{BrokerSide, ClusterError, ControllerThread},
    },
    config::BrokerConfig,
    group::offset_store::OffsetStore,
    metadata::{
        cluster_state::HostRecord,
        placement::{shard_addr, ShardId},
        producer_ids::ProducerIds,
        registry::TopicRegistry,
    },
    metrics::{self, BrokerMetrics, ControllerMetrics},
    net::listener,
    replication::lag_report::ReplicaLags,
    shard::{
        self,
        context::{ShardContext, StartError},
    },
    txn::state_log,
};

/// Why the broker could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The topic registry could not be loaded.
    #[error(transparent)]
    Registry(#[from] crate::metadata::registry::RegistryError),
    /// The producer id file could not be loaded.
    #[error(transparent)]
    ProducerIds(#[from] crate::metadata::producer_ids::ProducerIdError),
    /// The committed-offset store could not be opened.
    #[error(transparent)]
    Offsets(#[from] crate::group::offset_store::OffsetStoreError),
    /// A shard's executor could not be created or pinned.
    #[error("shard {shard}: cannot start its executor: {reason}")]
    Executor {
        /// The shard.
        shard: usize,
        /// glommio's error.
        reason: String,
    },
    /// A shard's storage could not start.
    #[error("shard {shard}: {source}")]
    Storage {
        /// The shard.
        shard: usize,
        /// The storage error.
        #[source]
        source: crate::storage::StorageError,
    },
    /// A shard's transaction-state log could not be opened or replayed.
    #[error("shard {shard}: transaction-state log: {source}")]
    TxnStateLog {
        /// The shard.
        shard: usize,
        /// What went wrong.
        #[source]
        source: crate::group::journal::JournalError,
    },
    /// The shards' transaction-state logs could not be applied to LMDB at start.
    #[error(transparent)]
    AdoptTxnLogs(#[from] crate::txn::state_log::AdoptError),
    /// A shard's listener failed.
    #[error("shard {shard}: listener: {source}")]
    Listener {
        /// The shard.
        shard: usize,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The metrics endpoint could not be bound (another host on this machine holds the
    /// default port, say): the message names the flag that picks another.
    #[error("metrics endpoint {addr}: {source} (give each host its own --metrics-listen HOST:PORT, or off)")]
    Metrics {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// A shard's thread panicked or could not be joined.
    #[error("shard {shard}: {reason}")]
    Thread {
        /// The shard.
        shard: usize,
        /// glommio's report.
        reason: String,
    },
    /// The TLS certificate, key or client CA could not be used.
    #[error(transparent)]
    Tls(#[from] crate::security::tls::TlsError),
    /// The cluster side of the host failed or refused to join.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The thread that runs a controlled shutdown could not start.
    #[error("cannot start the shutdown thread: {source}")]
    ShutdownThread {
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The data directory could not be created.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Runs the broker until `stop` is set (or a shard fails): starts one pinned executor
/// per shard, each of which opens its storage and serves its listener. On `stop` every
/// shard stops accepting, closes its partitions (flushing and fsyncing what was
/// appended) and returns.
pub fn run(config: BrokerConfig, stop: Arc<AtomicBool>) -> Result<(), BrokerError> {
    std::fs::create_dir_all(&config.data_dir).map_err(|source| BrokerError::DataDir {
        path: config.data_dir.clone(),
        source,
    })?;
    // Certificates are checked before anything starts: a bad file fails the start.
    let tls = config.tls.as_ref().map(|t| t.acceptor()).transpose()?;
    let record = HostRecord {
        advertise: config.advertise.clone(),
        port: config.listen.port(),
        tls_port: config.tls.as_ref().map(|t| t.listen.port()),
        shards: config.shards as u32,
        incarnation: incarnation(),
        fenced: false,
        draining: false,
    };
    let shutdown = ShutdownHandle::default();
    let lags = Arc::new(ReplicaLags::default());
    let quorum = ControllerMetrics::default();
    let (registry, controller) = match &config.cluster {
        None => (
            TopicRegistry::load(&config.data_dir, config.node_id, record)?,
            None,
        ),
        Some(cluster) => {
            let (link, calls) = tokio::sync::mpsc::unbounded_channel();
            let registry = TopicRegistry::clustered(&config.data_dir, link)?;
            let broker = cluster.roles.broker.then(|| BrokerSide {
                record,
                registry: Arc::clone(&registry),
                calls,
                shutdown: shutdown.clone(),
                lags: Arc::clone(&lags),
            });
            let thread = ControllerThread::start(
                config.node_id,
                cluster.clone(),
                config.data_dir.clone(),
                broker,
                quorum.clone(),
            )?;
            if let Err(e) = wait_until_ready(&thread, &stop) {
                thread.stop();
                return Err(e);
            }
            if !cluster.roles.broker {
                tracing::info!(
                    node_id = config.node_id,
                    "controller only: serving no Kafka clients"
                );
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                thread.stop();
                return Ok(());
            }
            (registry, Some(thread))
        }
    };
    // The shards stop once the host is out of the way: in a cluster, the controller
    // first moves its leadership elsewhere (Kafka's controlled shutdown), so clients
    // are redirected at once rather than after a session timeout.
    let shards_stop = match &controller {
        Some(_) => {
            let shards_stop = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&shards_stop);
            std::thread::Builder::new()
                .name("weir-shutdown".into())
                .spawn(move || controlled_shutdown(&stop, &flag, &shutdown))
                .map_err(|source| BrokerError::ShutdownThread { source })?;
            shards_stop
        }
        None => stop,
    };
    let served = serve(
        config,
        registry,
        lags,
        &quorum,
        Arc::clone(&shards_stop),
        tls,
    );
    // (A shard that failed ends the waiting thread too.)
    shards_stop.store(true, std::sync::atomic::Ordering::Release);
    if let Some(thread) = controller {
        thread.stop();
    }
    served
}

/// How long a stopping host waits for the controller to move its leadership.
const CONTROLLED_SHUTDOWN_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// Once `stop` is set: asks for a controlled shutdown, gives the shards a moment to
/// step down from what they led (failing the requests still waiting there with
/// NOT_LEADER_OR_FOLLOWER, so clients go to the new leaders), then sets `shards_stop`.
/// Without an answer within [`CONTROLLED_SHUTDOWN_MAX`] the host stops anyway, as
/// after a crash. Ends early when `shards_stop` is set by a shard failing.
fn controlled_shutdown(stop: &AtomicBool, shards_stop: &AtomicBool, shutdown: &ShutdownHandle) {
    use std::sync::atomic::Ordering;
    while !stop.load(Ordering::Acquire) {
        if shards_stop.load(Ordering::Acquire) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if shutdown.shut_down(CONTROLLED_SHUTDOWN_MAX) {
        tracing::info!("controlled shutdown: leadership moved; closing partitions");
        std::thread::sleep(shard::replica_roles::CHECK * 3);
    } else {
        tracing::warn!(
            "controlled shutdown: the controller did not answer within {CONTROLLED_SHUTDOWN_MAX:?}; stopping anyway"
        );
    }
    shards_stop.store(true, Ordering::Release);
}

/// Random per process start (time and pid): tells the controller a restart from an
/// impostor.
fn incarnation() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// Waits until the controller thread says this host may serve (registered, metadata
/// installed) or why it may not; gives up quietly when `stop` is set.
fn wait_until_ready(thread: &ControllerThread, stop: &AtomicBool) -> Result<(), BrokerError> {
    loop {
        match thread
            .ready
            .recv_timeout(std::time::Duration::from_millis(100))
        {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => return Err(e.into()),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if stop.load(std::sync::atomic::Ordering::Acquire) {
                    return Err(ClusterError::Stopped.into());
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(ClusterError::Stopped.into())
            }
        }
    }
}

/// Runs the shards until `stop`.
fn serve(
    config: BrokerConfig,
    registry: Arc<TopicRegistry>,
    lags: Arc<ReplicaLags>,
    quorum: &ControllerMetrics,
    stop: Arc<AtomicBool>,
    tls: Option<futures_rustls::TlsAcceptor>,
) -> Result<(), BrokerError> {
    let producer_ids = Arc::new(ProducerIds::load(&config.data_dir, config.node_id)?);
    let offsets = Arc::new(OffsetStore::open(
        &config.data_dir.join("group-offsets"),
        1 << 30,
    )?);
    // Every shard's transaction-state log is applied to LMDB before any shard serves,
    // whichever shard (or, before the host joined a cluster, which host mode) wrote it;
    // a single host's shards then begin new ones (`txn::state_log`).
    let logs = state_log::existing(&config.data_dir).map_err(|source| BrokerError::DataDir {
        path: config.data_dir.clone(),
        source,
    })?;
    state_log::adopt(logs, Arc::clone(&offsets))?;
    let config = Arc::new(config);
    let metrics = BrokerMetrics::new(config.shards, Arc::clone(&offsets) as _, quorum);
    if let Some(addr) = config.metrics_listen {
        metrics::http::start(addr, Arc::clone(&metrics))
            .map_err(|source| BrokerError::Metrics { addr, source })?;
    }
    tracing::info!(
        shards = config.shards,
        cores = ?(0..config.shards).map(|s| config.core_of(s)).collect::<Vec<_>>(),
        ports = ?(0..config.shards).map(|s| shard_addr(config.listen, ShardId(s)).port()).collect::<Vec<_>>(),
        data_dir = %config.data_dir.display(),
        flush_mode = ?config.flush_mode,
        flush_interval = ?config.flush_interval,
        "starting weir"
    );
    let mut handles = Vec::new();
    for shard in 0..config.shards {
        let (config, registry) = (Arc::clone(&config), Arc::clone(&registry));
        let producer_ids = Arc::clone(&producer_ids);
        let stop = Arc::clone(&stop);
        let offsets = Arc::clone(&offsets);
        let metrics = Arc::clone(&metrics);
        let lags = Arc::clone(&lags);
        let tls = tls.clone();
        let core = config.core_of(shard);
        let handle = LocalExecutorBuilder::new(Placement::Fixed(core))
            .name(&format!("weir-shard-{shard}"))
            .spin_before_park(config.spin_before_park)
            .spawn(move || async move {
                // Every line this shard's thread logs, from any of its tasks, names
                // the shard: the span stays entered for the executor's life.
                let span = tracing::info_span!("shard", shard);
                let _in_shard = span.enter();
                let ctx = ShardContext::start(
                    ShardId(shard),
                    config,
                    registry,
                    producer_ids,
                    offsets,
                    metrics,
                    lags,
                )
                .await
                .map_err(|e| match e {
                    StartError::Storage(source) => BrokerError::Storage { shard, source },
                    StartError::TxnStateLog(source) => BrokerError::TxnStateLog { shard, source },
                })?;
                shard::prepare(&ctx).await;
                listener::serve(Rc::clone(&ctx), stop, tls)
                    .await
                    .map_err(|source| BrokerError::Listener { shard, source })?;
                ctx.shut_down().await;
                Ok::<(), BrokerError>(())
            })
            .map_err(|e| BrokerError::Executor {
                shard,
                reason: e.to_string(),
            })?;
        handles.push(handle);
    }
    for (shard, handle) in handles.into_iter().enumerate() {
        match handle.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(e) => {
                return Err(BrokerError::Thread {
                    shard,
                    reason: e.to_string(),
                })
            }
        }
    }
    Ok(())
}
