//! Every `weir serve` option, declared once: the same field is the command-line flag
//! (clap, its doc comment the help) and the TOML key (serde, kebab-case). Unset fields
//! keep the value beneath: the built-in default, under the file, under the flags.
//! Adding an option is one field here and the line of its section that reads it.

use std::{net::SocketAddr, path::Path, path::PathBuf};

use clap::{ArgMatches, FromArgMatches};
use serde::Deserialize;

use super::{
    values::{parsed, Cores, LogFormat, OrOff, Span},
    ConfigError,
};
use crate::storage::FlushMode;

/// The options of `weir serve`, as flags or as a TOML file gives them.
#[derive(Debug, Clone, Default, PartialEq, clap::Args, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServeOptions {
    /// Address of shard 0's listener; shard N listens on PORT + N. [default: 0.0.0.0:9092]
    #[arg(long, value_name = "HOST:PORT", help_heading = "Network")]
    #[serde(default, deserialize_with = "parsed")]
    pub listen: Option<SocketAddr>,
    /// Host name clients are told to connect to. [default: 127.0.0.1]
    #[arg(long, value_name = "HOST", help_heading = "Network")]
    pub advertise: Option<String>,
    /// Where /metrics (Prometheus), /health and /ready are served, or off. [default: 0.0.0.0:9644]
    #[arg(long, value_name = "HOST:PORT", help_heading = "Network")]
    #[serde(default, deserialize_with = "parsed")]
    pub metrics_listen: Option<OrOff<SocketAddr>>,
    /// Largest request accepted; larger closes the connection. [default: 104857600]
    #[arg(long, value_name = "BYTES", help_heading = "Network")]
    pub max_request_bytes: Option<usize>,
    /// Request bytes a shard holds unanswered before it stops reading sockets. [default: 268435456]
    #[arg(long, value_name = "BYTES", help_heading = "Network")]
    pub inflight_bytes: Option<usize>,
    /// Close connections silent for this long, e.g. 10m. [default: 10m]
    #[arg(long, value_name = "DURATION", help_heading = "Network")]
    #[serde(default, deserialize_with = "parsed")]
    pub idle_timeout: Option<Span>,

    /// Number of shards, one pinned thread each. [default: one per core]
    #[arg(long, value_name = "N", help_heading = "Shards")]
    pub shards: Option<usize>,
    /// Cores to pin the shards to, one per shard, e.g. 1,3. [default: 0..shards]
    #[arg(long, value_name = "LIST", help_heading = "Shards")]
    #[serde(default, deserialize_with = "parsed")]
    pub cores: Option<Cores>,
    /// Poll this long for work before an idle shard sleeps, e.g. 200us; 0 on a machine
    /// shared with other work (tuning/shared.toml). [default: 500us]
    #[arg(long, value_name = "DURATION", help_heading = "Shards")]
    #[serde(default, deserialize_with = "parsed")]
    pub spin_before_park: Option<Span>,
    /// Log filter, e.g. info, debug, weir=debug. [default: info]
    #[arg(long, value_name = "LEVEL", help_heading = "Shards")]
    pub log_level: Option<String>,
    /// Log lines as plain text (coloured only on a terminal) or one JSON object each. [default: text]
    #[arg(long, value_name = "text|json", help_heading = "Shards")]
    #[serde(default, deserialize_with = "parsed")]
    pub log_format: Option<LogFormat>,

    /// Directory for partitions and broker state. [default: ./data]
    #[arg(long, value_name = "DIR", help_heading = "Storage")]
    pub data_dir: Option<PathBuf>,
    /// A fixed group-commit interval, e.g. 1ms, 250us, 0 (flush as soon as possible),
    /// instead of the adaptive one. [default: adaptive, see --flush-target-p99]
    #[arg(long, value_name = "DURATION", help_heading = "Storage")]
    #[serde(default, deserialize_with = "parsed")]
    pub flush_interval: Option<Span>,
    /// Adaptive group commit: each shard picks its commit interval to keep the p99
    /// commit wait under this, e.g. 2ms; off for the fixed --flush-interval.
    /// [default: 2ms]
    #[arg(long, value_name = "DURATION", help_heading = "Storage")]
    #[serde(default, deserialize_with = "parsed")]
    pub flush_target_p99: Option<OrOff<Span>>,
    /// fsync (durable acks) or write-only (comparison runs only). [default: fsync]
    #[arg(long, value_name = "MODE", help_heading = "Storage")]
    #[serde(default, deserialize_with = "parsed")]
    pub flush_mode: Option<FlushMode>,
    /// Start a group commit early once this many bytes wait for it. [default: 16777216]
    #[arg(long, value_name = "BYTES", help_heading = "Storage")]
    pub flush_bytes: Option<u64>,
    /// Largest record batch accepted. [default: 1048576]
    #[arg(long, value_name = "BYTES", help_heading = "Storage")]
    pub message_max_bytes: Option<usize>,
    /// Batch cache memory per shard. [default: 268435456]
    #[arg(long, value_name = "BYTES", help_heading = "Storage")]
    pub cache_bytes: Option<usize>,
    /// Segment size. [default: 1073741824]
    #[arg(long, value_name = "BYTES", help_heading = "Storage")]
    pub segment_bytes: Option<u64>,
    /// Delete a partition's oldest segments once everything in them is older than
    /// this, e.g. 7d (Kafka's retention.ms). [default: 7d]
    #[arg(long, value_name = "DURATION", help_heading = "Storage")]
    #[serde(default, deserialize_with = "parsed")]
    pub retention: Option<Span>,
    /// Delete a partition's oldest segments while it holds more than this many bytes
    /// without them (Kafka's retention.bytes). [default: no limit]
    #[arg(long, value_name = "BYTES", help_heading = "Storage")]
    pub retention_bytes: Option<u64>,
    /// Bytes per second one shard's log compaction may read plus write, 0 for no limit
    /// (Kafka's log.cleaner.io.max.bytes.per.second). [default: 33554432, 32 MiB/s]
    #[arg(long, value_name = "BYTES", help_heading = "Storage")]
    pub compaction_rate: Option<u64>,
    /// Bytes of deleted segments' files each shard keeps to reuse for new segments, 0 to
    /// delete them (new segments then grow by writing zeros ahead).
    /// [default: 4294967296, 4 GiB]
    #[arg(long, value_name = "BYTES", help_heading = "Storage")]
    pub recycle_bytes: Option<u64>,
    /// Bytes per second a shard frees when it deletes segment files it does not keep,
    /// 0 for at once. [default: 8388608, 8 MiB/s]
    #[arg(long, value_name = "BYTES", help_heading = "Storage")]
    pub delete_rate: Option<u64>,

    /// Create topics on first use. [default: true]
    #[arg(long, value_name = "BOOL", help_heading = "Topics")]
    pub auto_create_topics: Option<bool>,
    /// Partitions of auto-created topics. [default: 1]
    #[arg(long, value_name = "N", help_heading = "Topics")]
    pub default_partitions: Option<u32>,
    /// Replicas of auto-created topics and of CreateTopics with -1 (Kafka's
    /// default.replication.factor). [default: 1]
    #[arg(long, value_name = "N", help_heading = "Topics")]
    pub default_replication_factor: Option<u32>,

    /// This host's node id (Kafka's node.id); its shards are Kafka nodes
    /// N × 1024 + shard. [default: 0]
    #[arg(long, value_name = "N", help_heading = "Cluster")]
    pub node_id: Option<u32>,
    /// The controller quorum, e.g. 1@10.0.0.1:9091,2@10.0.0.2:9091,3@10.0.0.3:9091
    /// (Kafka's controller.quorum.voters). Without it the host is a cluster of one.
    #[arg(long, value_name = "ID@HOST:PORT,...", help_heading = "Cluster")]
    pub controller_quorum_voters: Option<String>,
    /// Where this host's controller listens. [default: its entry in the voter list]
    #[arg(long, value_name = "HOST:PORT", help_heading = "Cluster")]
    #[serde(default, deserialize_with = "parsed")]
    pub controller_listen: Option<SocketAddr>,
    /// broker, controller or broker,controller (Kafka's process.roles). A controller not
    /// in --controller-quorum-voters joins the quorum when `weir cluster add-voter`
    /// names it. [default: broker, plus controller when the node id is a voter]
    #[arg(long, value_name = "ROLES", help_heading = "Cluster")]
    pub process_roles: Option<String>,
    /// A host that has not heartbeaten to the controller for this long is fenced
    /// (Kafka's broker.session.timeout.ms, 9s there). [default: 3s]
    #[arg(long, value_name = "DURATION", help_heading = "Cluster")]
    #[serde(default, deserialize_with = "parsed")]
    pub session_timeout: Option<Span>,
    /// A follower not caught up for this long leaves the ISR (Kafka's
    /// replica.lag.time.max.ms). [default: 10s]
    #[arg(long, value_name = "DURATION", help_heading = "Cluster")]
    #[serde(default, deserialize_with = "parsed")]
    pub replica_lag_time_max: Option<Span>,

    /// The longest transaction.timeout.ms a transactional producer may ask for; a
    /// transaction open longer than its own timeout is aborted (Kafka's
    /// transaction.max.timeout.ms). [default: 15m]
    #[arg(long, value_name = "DURATION", help_heading = "Transactions")]
    #[serde(default, deserialize_with = "parsed")]
    pub transaction_max_timeout: Option<Span>,

    /// How long a transactional id with no transaction open is remembered after its last
    /// change; then it is forgotten, and its producer starts afresh as a new id would
    /// (Kafka's transactional.id.expiration.ms). [default: 7d]
    #[arg(long, value_name = "DURATION", help_heading = "Transactions")]
    #[serde(default, deserialize_with = "parsed")]
    pub transactional_id_expiration: Option<Span>,

    /// How long a partition remembers an idempotent producer after its last batch (to
    /// answer its retries with their offsets and check its sequences); a producer with a
    /// transaction open is kept (Kafka's producer.id.expiration.ms). [default: 1d]
    #[arg(long, value_name = "DURATION", help_heading = "Transactions")]
    #[serde(default, deserialize_with = "parsed")]
    pub producer_id_expiration: Option<Span>,

    /// Whether the active controller hands leadership back to preferred replicas by
    /// itself once hosts have stopped coming and going for 10s (Kafka's
    /// auto.leader.rebalance.enable); with false, only `weir cluster rebalance-leaders`
    /// or kafka-leader-election.sh does. [default: true]
    #[arg(long, value_name = "BOOL", help_heading = "Cluster")]
    pub auto_leader_rebalance: Option<bool>,
    /// This host's certificate (PEM chain) on the controller channel: with
    /// --controller-tls-key and --controller-tls-ca, every connection between hosts'
    /// controllers and agents is mutual TLS. A voter's must name its controller address.
    #[arg(long, value_name = "FILE", help_heading = "Cluster")]
    pub controller_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --controller-tls-cert.
    #[arg(long, value_name = "FILE", help_heading = "Cluster")]
    pub controller_tls_key: Option<PathBuf>,
    /// The CA (PEM) that signs every host's controller certificate; a peer without one
    /// it signed is refused.
    #[arg(long, value_name = "FILE", help_heading = "Cluster")]
    pub controller_tls_ca: Option<PathBuf>,

    /// Also serve TLS (Kafka's SSL protocol): shard 0 here, shard n on port + n.
    /// Needs --tls-cert and --tls-key; the certificate must name the advertised host.
    #[arg(long, value_name = "HOST:PORT", help_heading = "Security")]
    #[serde(default, deserialize_with = "parsed")]
    pub tls_listen: Option<SocketAddr>,
    /// The TLS certificate chain, PEM, leaf first.
    #[arg(long, value_name = "FILE", help_heading = "Security")]
    pub tls_cert: Option<PathBuf>,
    /// The TLS private key, PEM.
    #[arg(long, value_name = "FILE", help_heading = "Security")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS.
    #[arg(long, value_name = "FILE", help_heading = "Security")]
    pub tls_client_ca: Option<PathBuf>,
    /// Require a SASL login on every listener with one of these mechanisms
    /// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; comma-separated).
    #[arg(long, value_name = "LIST", help_heading = "Security")]
    pub sasl_mechanisms: Option<String>,
    /// Create or update this user's SCRAM credentials at start (repeatable; a list in
    /// the file). The first is also who this host's followers log in as on other hosts.
    #[arg(long, value_name = "NAME:PASSWORD", help_heading = "Security")]
    #[serde(default)]
    pub sasl_user: Vec<String>,
    /// `acl`: enforce ACLs on every API (`weir acls`); `none` (the default) lets every
    /// client do everything.
    #[arg(long, value_name = "acl|none", help_heading = "Security")]
    pub authorizer: Option<String>,
    /// Principals that bypass the ACLs, e.g. "User:admin;User:ops".
    #[arg(long, value_name = "PRINCIPALS", help_heading = "Security")]
    pub super_users: Option<String>,
}

impl ServeOptions {
    /// Reads options from a TOML file; an unknown key or a bad value is refused with
    /// the file, line and reason.
    pub fn from_file(path: &Path) -> Result<ServeOptions, ConfigError> {
        let file_error = |reason: String| ConfigError::File {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
        toml::from_str(&text).map_err(|e| file_error(e.to_string()))
    }

    /// The options of `file` (if any) with the flags given in `flags` over them.
    pub fn layered(file: Option<&Path>, flags: &ArgMatches) -> Result<ServeOptions, ConfigError> {
        let mut options = match file {
            Some(path) => ServeOptions::from_file(path)?,
            None => ServeOptions::default(),
        };
        // clap's update leaves every option the command line did not give untouched.
        options
            .update_from_arg_matches(flags)
            .map_err(|e| ConfigError::CommandLine(e.to_string()))?;
        Ok(options)
    }
}
