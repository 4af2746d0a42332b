//! The broker's typed configuration: built-in defaults, overridden by a TOML file
//! (`--config FILE`), overridden by command-line flags; validated once at start so an
//! invalid value is refused with a message that names the option.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use weir_client::units::{parse_cores, parse_duration};

use crate::{
    cluster::config::{cluster_from_flags, ClusterConfig, ClusterFlags},
    net::tls::TlsConfig,
    security::config::{AuthorizerConfig, SaslConfig},
    storage::{segment_pool::RecycleConfig, FlushConfig, FlushMode, LogConfig},
};

mod overrides;

pub use overrides::ConfigOverrides;

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
        }
    }
}

/// The metrics endpoint's default port (Redpanda's admin port, where operators look).
pub const METRICS_PORT: u16 = 9644;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines; coloured only when written to a terminal.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

fn invalid(option: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        option,
        reason: reason.into(),
    }
}

/// The TLS settings: all of listen, cert and key, or none (a client CA needs them).
fn tls_from(
    listen: Option<String>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
) -> Result<Option<TlsConfig>, ConfigError> {
    match (listen, cert, key) {
        (None, None, None) if client_ca.is_none() => Ok(None),
        (Some(listen), Some(cert), Some(key)) => Ok(Some(TlsConfig {
            listen: listen.parse().map_err(|_| {
                invalid(
                    "--tls-listen",
                    format!("{listen:?} is not HOST:PORT with a numeric host"),
                )
            })?,
            cert,
            key,
            client_ca,
        })),
        _ => Err(invalid(
            "--tls-listen",
            "TLS needs --tls-listen, --tls-cert and --tls-key together",
        )),
    }
}

impl BrokerConfig {
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

    /// Applies overrides on top of `self` and validates the result.
    pub fn apply(mut self, o: ConfigOverrides) -> Result<BrokerConfig, ConfigError> {
        // A fixed interval asked for without a target means a fixed interval.
        let fixed_interval = o.flush_interval.is_some() && o.flush_target_p99.is_none();
        if let Some(listen) = o.listen {
            self.listen = listen.parse().map_err(|_| {
                invalid(
                    "--listen",
                    format!("{listen:?} is not HOST:PORT with a numeric host"),
                )
            })?;
        }
        if let Some(a) = o.advertise {
            self.advertise = a;
        }
        if let Some(d) = o.data_dir {
            self.data_dir = d;
        }
        if let Some(n) = o.shards {
            self.shards = n;
        }
        if let Some(cores) = o.cores {
            self.cores = parse_cores(&cores).map_err(|e| invalid("--cores", e.to_string()))?;
        }
        if let Some(i) = o.flush_interval {
            self.flush_interval =
                parse_duration(&i).map_err(|e| invalid("--flush-interval", e.to_string()))?;
        }
        if fixed_interval {
            self.flush_target_p99 = None;
        }
        if let Some(t) = o.flush_target_p99 {
            self.flush_target_p99 = match t.as_str() {
                "off" | "none" => None,
                t => Some(
                    parse_duration(t).map_err(|e| invalid("--flush-target-p99", e.to_string()))?,
                ),
            };
        }
        if let Some(m) = o.flush_mode {
            self.flush_mode = match m.as_str() {
                "fsync" => FlushMode::Fsync,
                "write-only" => FlushMode::WriteOnly,
                other => {
                    return Err(invalid(
                        "--flush-mode",
                        format!("{other:?} is neither fsync nor write-only"),
                    ))
                }
            };
        }
        if let Some(n) = o.flush_bytes {
            self.flush_bytes_max = n;
        }
        if let Some(s) = o.spin_before_park {
            self.spin_before_park =
                parse_duration(&s).map_err(|e| invalid("--spin-before-park", e.to_string()))?;
        }
        if let Some(b) = o.auto_create_topics {
            self.auto_create_topics = b;
        }
        if let Some(n) = o.default_partitions {
            self.default_partitions = n;
        }
        if let Some(l) = o.log_level {
            self.log_level = l;
        }
        if let Some(f) = o.log_format {
            self.log_format = match f.as_str() {
                "text" => LogFormat::Text,
                "json" => LogFormat::Json,
                other => {
                    return Err(invalid(
                        "--log-format",
                        format!("{other:?} is neither text nor json"),
                    ))
                }
            };
        }
        if let Some(m) = o.metrics_listen {
            self.metrics_listen = match m.as_str() {
                "off" | "none" => None,
                addr => Some(addr.parse().map_err(|_| {
                    invalid(
                        "--metrics-listen",
                        format!("{addr:?} is not HOST:PORT (or off)"),
                    )
                })?),
            };
        }
        if let Some(n) = o.max_request_bytes {
            self.max_request_bytes = n;
        }
        if let Some(n) = o.message_max_bytes {
            self.message_max_bytes = n;
        }
        if let Some(n) = o.cache_bytes {
            self.cache_bytes_max = n;
        }
        if let Some(n) = o.segment_bytes {
            self.log.segment_bytes = n;
        }
        if let Some(n) = o.inflight_bytes {
            self.inflight_bytes_max = n;
        }
        if let Some(t) = o.idle_timeout {
            self.idle_timeout =
                parse_duration(&t).map_err(|e| invalid("--idle-timeout", e.to_string()))?;
        }
        if let Some(r) = o.retention {
            let age = parse_duration(&r).map_err(|e| invalid("--retention", e.to_string()))?;
            if age.is_zero() {
                return Err(invalid("--retention", "must be more than 0"));
            }
            self.log.retention_age_max = Some(age);
        }
        if let Some(n) = o.retention_bytes {
            if n == 0 {
                return Err(invalid("--retention-bytes", "must be more than 0"));
            }
            self.log.retention_bytes_max = Some(n);
        }
        self.compaction_rate = o.compaction_rate.unwrap_or(self.compaction_rate);
        self.recycle.bytes_max = o.recycle_bytes.unwrap_or(self.recycle.bytes_max);
        self.recycle.delete_rate = o.delete_rate.unwrap_or(self.recycle.delete_rate);
        if let Some(n) = o.node_id {
            self.node_id = n;
        }
        self.cluster = cluster_from_flags(
            self.node_id,
            self.listen,
            ClusterFlags {
                voters: o.controller_quorum_voters,
                controller_listen: o.controller_listen,
                roles: o.process_roles,
                session_timeout: o.session_timeout,
                default_replication_factor: o.default_replication_factor,
                replica_lag_time_max: o.replica_lag_time_max,
            },
        )
        .map_err(|e| invalid(e.option, e.reason))?;
        self.tls = tls_from(o.tls_listen, o.tls_cert, o.tls_key, o.tls_client_ca)?;
        self.sasl = SaslConfig::from_flags(
            o.sasl_mechanisms.as_deref(),
            o.sasl_user.as_deref().unwrap_or_default(),
        )
        .map_err(|e| invalid(e.option, e.reason))?;
        self.authorizer =
            AuthorizerConfig::from_flags(o.authorizer.as_deref(), o.super_users.as_deref())
                .map_err(|e| invalid(e.option, e.reason))?;
        if self.sasl.as_ref().is_some_and(|s| s.users.is_empty()) && self.cluster.is_some() {
            return Err(invalid(
                "--sasl-user",
                "a cluster host with SASL needs one: its followers log in as the first",
            ));
        }
        self.validate()?;
        Ok(self)
    }

    /// Checks every value against its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if self.shards == 0 || self.shards > 1024 {
            return Err(invalid(
                "--shards",
                format!("{} is not within 1..=1024", self.shards),
            ));
        }
        if !self.cores.is_empty() && self.cores.len() != self.shards {
            return Err(invalid(
                "--cores",
                format!(
                    "{} cores listed for {} shards",
                    self.cores.len(),
                    self.shards
                ),
            ));
        }
        if let Some(c) = self.cores.iter().find(|&&c| c >= cpus) {
            return Err(invalid(
                "--cores",
                format!("core {c} does not exist (this machine has {cpus})"),
            ));
        }
        if self.cores.is_empty() && self.shards > cpus {
            return Err(invalid(
                "--shards",
                format!("{} shards but only {cpus} cores", self.shards),
            ));
        }
        if u32::from(self.listen.port()) + self.shards as u32 - 1 > u32::from(u16::MAX) {
            return Err(invalid("--listen", "port + shards runs past 65535"));
        }
        if let Some(tls) = &self.tls {
            let (plain, secure) = (u32::from(self.listen.port()), u32::from(tls.listen.port()));
            let shards = self.shards as u32;
            if secure + shards - 1 > u32::from(u16::MAX) {
                return Err(invalid("--tls-listen", "port + shards runs past 65535"));
            }
            if secure < plain + shards && plain < secure + shards {
                return Err(invalid(
                    "--tls-listen",
                    "its ports overlap the plaintext listener's",
                ));
            }
        }
        if let Some(t) = self.flush_target_p99 {
            if t < Duration::from_micros(100) || t > Duration::from_secs(10) {
                return Err(invalid("--flush-target-p99", "must be within 100us..=10s"));
            }
        }
        if self.flush_interval > Duration::from_secs(10) {
            return Err(invalid("--flush-interval", "at most 10s"));
        }
        if self.spin_before_park > Duration::from_secs(1) {
            return Err(invalid("--spin-before-park", "at most 1s"));
        }
        if self.flush_bytes_max < 4096 {
            return Err(invalid("--flush-bytes", "must be at least 4096"));
        }
        if self.default_partitions == 0 || self.default_partitions > 10_000 {
            return Err(invalid("--default-partitions", "must be within 1..=10000"));
        }
        if self.advertise.is_empty() {
            return Err(invalid("--advertise", "must not be empty"));
        }
        if self.inflight_bytes_max < 64 << 10 {
            return Err(invalid("--inflight-bytes", "must be at least 64 KiB"));
        }
        if self.idle_timeout < Duration::from_millis(100) {
            return Err(invalid("--idle-timeout", "must be at least 100ms"));
        }
        if self.max_request_bytes < 1024 {
            return Err(invalid("--max-request-bytes", "must be at least 1024"));
        }
        if self.message_max_bytes < 1024
            || self.message_max_bytes > crate::storage::config::STORED_BATCH_BYTES_MAX
        {
            return Err(invalid(
                "--message-max-bytes",
                "must be within 1 KiB..=128 MiB",
            ));
        }
        tracing_subscriber::EnvFilter::try_new(&self.log_level)
            .map_err(|e| invalid("--log-level", e.to_string()))?;
        self.log
            .validate()
            .map_err(|e| invalid("--segment-bytes", e.to_string()))
    }

    /// The core shard `shard` runs on.
    pub fn core_of(&self, shard: usize) -> usize {
        self.cores.get(shard).copied().unwrap_or(shard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tuning_profile_loads_and_the_default_profile_is_the_default() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tuning");
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("tuning/") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "toml") {
                let overrides = ConfigOverrides::from_file(&path).expect("profile parses");
                let config = BrokerConfig::default()
                    .apply(overrides)
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
        let o = ConfigOverrides {
            metrics_listen: Some("off".into()),
            log_format: Some("json".into()),
            ..ConfigOverrides::default()
        };
        let c = BrokerConfig::default().apply(o).expect("valid");
        assert_eq!((c.metrics_listen, c.log_format), (None, LogFormat::Json));
        for bad in [
            ConfigOverrides {
                metrics_listen: Some("9644".into()),
                ..ConfigOverrides::default()
            },
            ConfigOverrides {
                log_format: Some("xml".into()),
                ..ConfigOverrides::default()
            },
        ] {
            assert!(BrokerConfig::default().apply(bad).is_err());
        }
    }

    #[test]
    fn retention_flags_set_the_partition_log_config_and_refuse_zero() {
        let o = ConfigOverrides {
            retention: Some("2h".into()),
            retention_bytes: Some(1 << 30),
            ..ConfigOverrides::default()
        };
        let c = BrokerConfig::default().apply(o).expect("valid");
        assert_eq!(c.log.retention_age_max, Some(Duration::from_secs(7200)));
        assert_eq!(c.log.retention_bytes_max, Some(1 << 30));
        for o in [
            ConfigOverrides {
                retention: Some("0s".into()),
                ..ConfigOverrides::default()
            },
            ConfigOverrides {
                retention_bytes: Some(0),
                ..ConfigOverrides::default()
            },
        ] {
            assert!(BrokerConfig::default().apply(o).is_err());
        }
    }

    #[test]
    fn flags_win_over_the_file_and_bad_values_name_their_option() {
        let file: ConfigOverrides =
            toml::from_str("shards = 1\nflush-interval = \"5ms\"\n").expect("toml");
        let flags = ConfigOverrides {
            flush_interval: Some("2ms".into()),
            ..ConfigOverrides::default()
        };
        let c = BrokerConfig::default()
            .apply(flags.over(file))
            .expect("valid");
        assert_eq!(c.shards, 1);
        assert_eq!(c.flush_interval, Duration::from_millis(2));
        assert_eq!(
            c.flush_target_p99, None,
            "a fixed interval turns adaptive off"
        );
        let adaptive = BrokerConfig::default()
            .apply(ConfigOverrides {
                flush_target_p99: Some("5ms".into()),
                ..ConfigOverrides::default()
            })
            .expect("valid");
        assert_eq!(adaptive.flush_target_p99, Some(Duration::from_millis(5)));
        let bad = ConfigOverrides {
            flush_mode: Some("sometimes".into()),
            ..ConfigOverrides::default()
        };
        let err = BrokerConfig::default()
            .apply(bad)
            .expect_err("invalid")
            .to_string();
        assert!(err.contains("--flush-mode"), "{err}");
        assert!(
            toml::from_str::<ConfigOverrides>("colour = 1").is_err(),
            "unknown keys are refused"
        );
    }
}
