//! The broker's typed configuration: built-in defaults, overridden by a TOML file
//! (`--config FILE`), overridden by command-line flags; validated once at start so an
//! invalid value is refused with a message that names the option.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use crate::{
    cluster::config::ClusterConfig,
    security::config::{AuthorizerConfig, SaslConfig},
    security::tls::TlsConfig,
    storage::{segment_pool::RecycleConfig, FlushConfig, FlushMode, LogConfig},
};

mod cluster;
mod network;
mod options;
mod security;
mod shards;
mod storage;
mod transactions;
mod values;

pub use options::ServeOptions;
pub use values::{Cores, LogFormat, OrOff, Span, ValueError};

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value is out of range or malformed; names the option.
    #[error("invalid value for {option}: {reason}")]
    Invalid {
        /// The option, as spelled on the command line.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The command line could not be read into the options.
    #[error("command line: {0}")]
    CommandLine(String),
    /// The TOML file could not be read or parsed.
    #[error("config file {path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// A value for every broker setting. Construct with [`BrokerConfig::default`] and
/// [`BrokerConfig::apply`], then [`BrokerConfig::validate`].
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerConfig {
    /// Address of shard 0's listener; shard `n` listens on `port + n`.
    pub listen: SocketAddr,
    /// Host clients are told to connect to (Metadata).
    pub advertise: String,
    /// Where partitions and broker state live.
    pub data_dir: PathBuf,
    /// Number of shards (one pinned thread each).
    pub shards: usize,
    /// Cores to pin the shards to, one per shard; empty pins shard `n` to core `n`.
    pub cores: Vec<usize>,
    /// Group-commit interval (when `flush_target_p99` is unset).
    pub flush_interval: Duration,
    /// Adaptive group commit: each shard picks its interval to keep the p99 commit
    /// wait under this (`--flush-target-p99`); `None`: the fixed `flush_interval`.
    pub flush_target_p99: Option<Duration>,
    /// Whether flushes fsync.
    pub flush_mode: FlushMode,
    /// A flush starts before the interval is up once this many bytes wait for it.
    pub flush_bytes_max: u64,
    /// How long an idle shard polls for work before it sleeps in the kernel. Waking a
    /// sleeping core costs tens of microseconds and, on a virtual machine, occasionally
    /// milliseconds; polling trades a busy core for steadier tail latency.
    pub spin_before_park: Duration,
    /// Create a topic on first use (Metadata, Produce) with `default_partitions`.
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic or of a CreateTopics with -1.
    pub default_partitions: u32,
    /// `tracing` filter, e.g. `info` or `weir=debug`.
    pub log_level: String,
    /// How log lines are written.
    pub log_format: LogFormat,
    /// Where `/metrics`, `/health` and `/ready` are served; `None` serves nothing.
    pub metrics_listen: Option<SocketAddr>,
    /// Largest request frame accepted; a larger one closes the connection.
    pub max_request_bytes: usize,
    /// Largest record batch accepted (Kafka's `message.max.bytes`).
    pub message_max_bytes: usize,
    /// Memory per shard for the batch cache.
    pub cache_bytes_max: usize,
    /// Request bytes a shard holds (read but not yet answered) before it stops reading
    /// from its sockets.
    pub inflight_bytes_max: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// Segment settings for every partition.
    pub log: LogConfig,
    /// Bytes a compaction pass reads plus writes per second per shard; 0: unpaced.
    pub compaction_rate: u64,
    /// Each shard's pool of deleted segments' files, reused for new segments.
    pub recycle: RecycleConfig,
    /// This host's node id (Kafka's `node.id`): its shards are Kafka nodes
    /// `node_id × 1024 + shard`. 0 keeps a single host's node ids 0, 1, ….
    pub node_id: u32,
    /// How this host takes part in a cluster; `None`: it is a cluster of one, with no
    /// controller machinery.
    pub cluster: Option<ClusterConfig>,
    /// TLS listeners beside the plaintext ones; `None`: plaintext only.
    pub tls: Option<TlsConfig>,
    /// SASL required on every listener; `None`: no login (anyone who can connect).
    pub sasl: Option<SaslConfig>,
    /// ACLs enforced; `None`: every client may do everything.
    pub authorizer: Option<AuthorizerConfig>,
    /// Limits of transactions and idempotent producers.
    pub transactions: TransactionConfig,
}

/// How long transactions may stay open and their producers be remembered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionConfig {
    /// The longest `transaction.timeout.ms` a producer may ask for.
    pub timeout_max: Duration,
    /// How long a transactional id with no transaction open stays known after its last
    /// change (Kafka's `transactional.id.expiration.ms`).
    pub id_expiration: Duration,
    /// How long a partition remembers an idempotent producer after its last batch, for
    /// answering retries and checking sequences (Kafka's `producer.id.expiration.ms`).
    pub producer_id_expiration: Duration,
}

impl Default for TransactionConfig {
    fn default() -> Self {
        TransactionConfig {
            timeout_max: Duration::from_secs(15 * 60),
            id_expiration: Duration::from_secs(7 * 24 * 3600),
            producer_id_expiration: Duration::from_secs(24 * 3600),
        }
    }
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 9092)),
            advertise: "127.0.0.1".into(),
            data_dir: PathBuf::from("data"),
            shards: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cores: Vec::new(),
            flush_interval: Duration::from_millis(1),
            // The adaptive group commit, polling before sleeping: best on a dedicated
            // host (tuning/RESULTS.md); tuning/shared.toml is the lighter setting.
            flush_target_p99: Some(Duration::from_millis(2)),
            flush_mode: FlushMode::Fsync,
            flush_bytes_max: 16 << 20,
            spin_before_park: Duration::from_micros(500),
            auto_create_topics: true,
            default_partitions: 1,
            log_level: "info".into(),
            log_format: LogFormat::Text,
            metrics_listen: Some(SocketAddr::from(([0, 0, 0, 0], METRICS_PORT))),
            max_request_bytes: 100 << 20,
            message_max_bytes: 1 << 20,
            cache_bytes_max: 256 << 20,
            inflight_bytes_max: 256 << 20,
            idle_timeout: Duration::from_secs(600),
            log: LogConfig::default(),
            compaction_rate: 32 << 20,
            recycle: RecycleConfig::default(),
            node_id: 0,
            cluster: None,
            tls: None,
            sasl: None,
            authorizer: None,
            transactions: TransactionConfig::default(),
        }
    }
}

/// The metrics endpoint's default port (Redpanda's admin port, where operators look).
pub const METRICS_PORT: u16 = 9644;

fn invalid(option: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        option,
        reason: reason.into(),
    }
}

impl BrokerConfig {
    /// The dialer a shard reaches other nodes with (replica fetches, transaction
    /// markers and enrolments): plaintext, logged in as the host's first `--sasl-user`
    /// where SASL is required.
    pub fn peer_dialer(&self) -> weir_client::dialer::Dialer {
        let login = self.sasl.as_ref().and_then(|s| s.replica_login());
        weir_client::dialer::Dialer::plaintext().with_sasl(login)
    }

    /// Each shard's group-commit settings.
    pub fn flush_config(&self) -> FlushConfig {
        FlushConfig {
            interval: self.flush_interval,
            dirty_bytes_max: self.flush_bytes_max,
            mode: self.flush_mode,
            target_p99: self.flush_target_p99,
        }
    }

    /// Replicas of a topic created without a factor: 1 on a single host.
    pub fn default_replication_factor(&self) -> usize {
        self.cluster
            .as_ref()
            .map_or(1, |c| c.default_replication_factor)
    }

    /// Applies the options on top of `self`, section by section, and validates the
    /// result.
    pub fn apply(mut self, o: ServeOptions) -> Result<BrokerConfig, ConfigError> {
        network::apply(&mut self, &o);
        shards::apply(&mut self, &o);
        storage::apply(&mut self, &o)?;
        cluster::apply(&mut self, &o)?;
        security::apply(&mut self, &o)?;
        transactions::apply(&mut self, &o);
        self.validate()?;
        Ok(self)
    }

    /// Checks every value against its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        shards::validate(self)?;
        network::validate(self)?;
        storage::validate(self)?;
        transactions::validate(self)?;
        security::validate(self)
    }

    /// The core shard `shard` runs on.
    pub fn core_of(&self, shard: usize) -> usize {
        self.cores.get(shard).copied().unwrap_or(shard)
    }
}

#[cfg(test)]
mod tests {
    use clap::Args;

    use super::*;

    /// The options `weir serve ARGS` gives, over the TOML text `file` (if any).
    fn serve(file: Option<&str>, args: &[&str]) -> Result<ServeOptions, String> {
        let command = ServeOptions::augment_args(clap::Command::new("serve"));
        let matches = command
            .try_get_matches_from(std::iter::once("serve").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("weir.toml");
        if let Some(text) = file {
            std::fs::write(&path, text).expect("write");
        }
        ServeOptions::layered(file.map(|_| path.as_path()), &matches).map_err(|e| e.to_string())
    }

    #[test]
    fn every_tuning_profile_loads_and_the_default_profile_is_the_default() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tuning");
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("tuning/") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "toml") {
                let options = ServeOptions::from_file(&path).expect("profile parses");
                let config = BrokerConfig::default()
                    .apply(options)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                seen.push((
                    path.file_stem().unwrap().to_string_lossy().into_owned(),
                    config,
                ));
            }
        }
        seen.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "default",
                "fixed-1ms",
                "low-latency",
                "max-throughput",
                "no-fsync",
                "shared"
            ]
        );
        let default = BrokerConfig::default();
        let (_, profile) = &seen[0];
        assert_eq!(profile.flush_interval, default.flush_interval);
        assert_eq!(profile.flush_target_p99, default.flush_target_p99);
        assert_eq!(profile.flush_mode, default.flush_mode);
        assert_eq!(profile.flush_bytes_max, default.flush_bytes_max);
        assert_eq!(profile.spin_before_park, default.spin_before_park);
        assert_eq!(profile.inflight_bytes_max, default.inflight_bytes_max);
        assert_eq!(profile.cache_bytes_max, default.cache_bytes_max);
        assert_eq!(seen[4].1.flush_mode, FlushMode::WriteOnly);
    }

    #[test]
    fn metrics_and_log_format_flags_parse_and_refuse_nonsense() {
        let default = BrokerConfig::default();
        assert_eq!(
            default.metrics_listen,
            Some(SocketAddr::from(([0, 0, 0, 0], METRICS_PORT)))
        );
        let o = serve(None, &["--metrics-listen", "off", "--log-format", "json"]).expect("valid");
        let c = BrokerConfig::default().apply(o).expect("valid");
        assert_eq!((c.metrics_listen, c.log_format), (None, LogFormat::Json));
        for (bad, option) in [
            (["--metrics-listen", "9644"], "--metrics-listen"),
            (["--log-format", "xml"], "--log-format"),
        ] {
            let err = serve(None, &bad).expect_err("refused");
            assert!(err.contains(option), "{err}");
        }
    }

    #[test]
    fn retention_flags_set_the_partition_log_config_and_refuse_zero() {
        let o = serve(
            None,
            &["--retention", "2h", "--retention-bytes", "1073741824"],
        )
        .expect("valid");
        let c = BrokerConfig::default().apply(o).expect("valid");
        assert_eq!(c.log.retention_age_max, Some(Duration::from_secs(7200)));
        assert_eq!(c.log.retention_bytes_max, Some(1 << 30));
        for args in [["--retention", "0s"], ["--retention-bytes", "0"]] {
            let o = serve(None, &args).expect("parses");
            let err = BrokerConfig::default().apply(o).expect_err("refused");
            assert!(err.to_string().contains(args[0]), "{err}");
        }
    }

    #[test]
    fn the_transaction_limits_are_set_from_flag_or_file_and_refused_out_of_range() {
        assert_eq!(
            BrokerConfig::default().transactions.timeout_max,
            Duration::from_secs(900)
        );
        let o = serve(Some("transaction-max-timeout = \"1h\"\n"), &[]).expect("valid");
        let c = BrokerConfig::default().apply(o).expect("valid");
        assert_eq!(c.transactions.timeout_max, Duration::from_secs(3600));
        for flag in [
            "--transaction-max-timeout",
            "--transactional-id-expiration",
            "--producer-id-expiration",
        ] {
            for bad in ["500ms", "30d"] {
                let o = serve(None, &[flag, bad]).expect("parses");
                let err = BrokerConfig::default().apply(o).expect_err("refused");
                assert!(err.to_string().contains(flag), "{err}");
            }
        }
        let d = BrokerConfig::default().transactions;
        assert_eq!(d.id_expiration, Duration::from_secs(7 * 86_400));
        assert_eq!(d.producer_id_expiration, Duration::from_secs(86_400));
        let o = serve(Some("transactional-id-expiration = \"2d\"\n"), &[]).expect("valid");
        let c = BrokerConfig::default().apply(o).expect("valid");
        assert_eq!(
            c.transactions.id_expiration,
            Duration::from_secs(2 * 86_400)
        );
    }

    #[test]
    fn flags_win_over_the_file_and_bad_values_name_their_option() {
        let file = "shards = 1\nflush-interval = \"5ms\"\n";
        let o = serve(Some(file), &["--flush-interval", "2ms"]).expect("valid");
        let c = BrokerConfig::default().apply(o).expect("valid");
        assert_eq!(c.shards, 1);
        assert_eq!(c.flush_interval, Duration::from_millis(2));
        assert_eq!(
            c.flush_target_p99, None,
            "a fixed interval turns adaptive off"
        );
        let adaptive = serve(None, &["--flush-target-p99", "5ms"]).expect("valid");
        let adaptive = BrokerConfig::default().apply(adaptive).expect("valid");
        assert_eq!(adaptive.flush_target_p99, Some(Duration::from_millis(5)));
        let err = serve(None, &["--flush-mode", "sometimes"]).expect_err("invalid");
        assert!(err.contains("--flush-mode"), "{err}");
        let err = serve(Some("flush-mode = \"sometimes\"\n"), &[]).expect_err("invalid");
        assert!(
            err.contains("flush-mode") && err.contains("neither"),
            "{err}"
        );
        let err = serve(Some("colour = 1\n"), &[]).expect_err("unknown key");
        assert!(err.contains("colour"), "unknown keys are refused: {err}");
    }
}
