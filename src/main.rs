//! The `weir` command: `weir serve` runs the broker.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use weir::{
    admin::{
        acls::AclSpec,
        cluster_status,
        commands::{Admin, AdminError, ResetTarget},
    },
    config::{BrokerConfig, ConfigOverrides, LogFormat},
};
use weir_client::sasl::{SaslLogin, SaslMechanism};

/// Survives requests that claim absurd array lengths; see `weir::reserve_alloc`.
#[global_allocator]
static ALLOCATOR: weir::reserve_alloc::ReservingAllocator = weir::reserve_alloc::ReservingAllocator;

/// weir: a Kafka-wire-compatible, thread-per-core message broker.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker. Every option can also be set in the TOML file given with
    /// --config (same names, e.g. `flush-interval = "5ms"`); a flag wins over the file.
    Serve(Box<ServeArgs>),
    /// Manage topics on a running broker.
    Topics {
        #[command(flatten)]
        broker: BrokerAddress,
        #[command(subcommand)]
        command: TopicsCommand,
    },
    /// Inspect consumer groups and reset their offsets on a running broker.
    Groups {
        #[command(flatten)]
        broker: BrokerAddress,
        #[command(subcommand)]
        command: GroupsCommand,
    },
    /// Manage SASL/SCRAM users on a running broker.
    Users {
        #[command(flatten)]
        broker: BrokerAddress,
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Manage ACLs on a running broker (enforced with `weir serve --authorizer acl`).
    Acls {
        #[command(flatten)]
        broker: BrokerAddress,
        #[command(subcommand)]
        command: AclsCommand,
    },
    /// Inspect the cluster: the controller quorum and the hosts.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// The voters, the Raft leader and term, and every host with its shards, state,
    /// last heartbeat and partition count.
    Status {
        /// Any voter's controller address.
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9091")]
        controller: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Hand every partition's leadership back to its preferred (first) replica where
    /// that one is live and in sync (the controller also does so by itself after 10s
    /// without hosts coming or going).
    RebalanceLeaders {
        /// Any voter's controller address.
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9091")]
        controller: String,
    },
    /// Move leadership off a host before maintenance: its partitions are led by in-sync
    /// replicas elsewhere and it gets no new replicas until `--undo`.
    Drain {
        /// The host's node id.
        #[arg(long)]
        node: u32,
        /// Also move its replicas to other live hosts (each leaves once its replacement
        /// is in sync), so the host can be retired.
        #[arg(long, conflicts_with = "undo")]
        reassign: bool,
        /// End the drain (leadership returns with the next rebalance).
        #[arg(long)]
        undo: bool,
        /// Any voter's controller address.
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9091")]
        controller: String,
    },
}

/// Which running broker the admin commands talk to.
#[derive(clap::Args)]
struct BrokerAddress {
    /// Any broker of the cluster.
    #[arg(
        long,
        default_value = "127.0.0.1:9092",
        value_name = "HOST:PORT",
        global = true
    )]
    bootstrap: String,
    /// Log in as this user (where the broker requires SASL).
    #[arg(long, value_name = "NAME:PASSWORD", global = true)]
    sasl_user: Option<String>,
    /// The SASL mechanism to log in with.
    #[arg(
        long,
        value_name = "MECHANISM",
        default_value = "SCRAM-SHA-512",
        global = true
    )]
    sasl_mechanism: String,
}

impl BrokerAddress {
    /// The SASL login the flags ask for, if any.
    fn login(&self) -> anyhow::Result<Option<SaslLogin>> {
        let Some(text) = &self.sasl_user else {
            return Ok(None);
        };
        let mechanism = SaslMechanism::from_name(&self.sasl_mechanism).with_context(|| {
            format!(
                "--sasl-mechanism {:?}: not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                self.sasl_mechanism
            )
        })?;
        let login =
            SaslLogin::parse(mechanism, text).map_err(|e| anyhow::anyhow!("--sasl-user: {e}"))?;
        Ok(Some(login))
    }
}

#[derive(Subcommand)]
enum AclsCommand {
    /// Allow (or with --deny, deny) a principal an operation on a resource.
    Add(AclSpec),
    /// List ACLs, all or those the flags pick.
    List(AclSpec),
    /// Remove the ACLs the flags pick.
    Remove(AclSpec),
}

#[derive(Subcommand)]
enum UsersCommand {
    /// List users and their SCRAM mechanisms.
    List,
    /// Create a user, or set its password: SCRAM-SHA-256 and SCRAM-SHA-512 credentials
    /// (the password is salted here; the broker never sees it).
    Create {
        /// User name.
        name: String,
        /// The password.
        #[arg(long)]
        password: String,
        /// PBKDF2 iterations (4096..=16384).
        #[arg(long, default_value_t = 4096)]
        iterations: u32,
    },
    /// Delete a user's credentials.
    Delete {
        /// User name.
        name: String,
    },
}

#[derive(Subcommand)]
enum TopicsCommand {
    /// List topics with their partition counts.
    List,
    /// Create a topic.
    Create {
        /// Topic name.
        name: String,
        /// Number of partitions.
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Replicas per partition, each on its own host. [default: the broker's]
        #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
        replication_factor: i16,
        /// A topic config, key=value (repeatable), e.g. cleanup.policy=compact.
        #[arg(long = "config")]
        configs: Vec<String>,
    },
    /// Show each partition's leader (shard), log start offset and high watermark.
    Describe {
        /// Topic name.
        name: String,
    },
    /// Delete a topic and its data.
    Delete {
        /// Topic name.
        name: String,
    },
    /// Set (key=value) or remove (--delete KEY) a topic's config overrides, e.g.
    /// retention.ms=3600000; the others are kept.
    AlterConfig {
        /// Topic name.
        name: String,
        /// Overrides to set, as key=value.
        set: Vec<String>,
        /// Overrides to remove (back to the broker's setting).
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
    },
    /// Grow a topic to more partitions (partitions are never removed).
    AddPartitions {
        /// Topic name.
        name: String,
        /// The topic's new partition count.
        #[arg(long)]
        partitions: i32,
    },
    /// Delete a partition's records before an offset (moves its log start offset).
    DeleteRecords {
        /// Topic name.
        name: String,
        /// The partition.
        #[arg(long)]
        partition: i32,
        /// Records below this offset are deleted; -1: everything up to the high watermark.
        #[arg(long, allow_hyphen_values = true)]
        before: i64,
    },
}

#[derive(Subcommand)]
enum GroupsCommand {
    /// List consumer groups and their states.
    List,
    /// Show members, assignments, committed offsets, log end offsets and lag.
    Describe {
        /// Group id.
        group: String,
    },
    /// Move a group's committed offsets; refused while the group has members.
    ResetOffsets {
        /// Group id.
        group: String,
        /// Topic whose partitions to reset.
        #[arg(long)]
        topic: String,
        /// To each partition's log start offset.
        #[arg(long, group = "target")]
        to_earliest: bool,
        /// To each partition's high watermark.
        #[arg(long, group = "target")]
        to_latest: bool,
        /// To this offset on every partition.
        #[arg(long, group = "target", value_name = "N")]
        to_offset: Option<i64>,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML file with settings.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address of shard 0's listener; shard N listens on PORT + N. [default: 0.0.0.0:9092]
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// Host name clients are told to connect to. [default: 127.0.0.1]
    #[arg(long, value_name = "HOST")]
    advertise: Option<String>,
    /// Directory for partitions and broker state. [default: ./data]
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Number of shards, one pinned thread each. [default: one per core]
    #[arg(long, value_name = "N")]
    shards: Option<usize>,
    /// Cores to pin the shards to, one per shard, e.g. 1,3. [default: 0..shards]
    #[arg(long, value_name = "LIST")]
    cores: Option<String>,
    /// A fixed group-commit interval, e.g. 1ms, 250us, 0 (flush as soon as possible),
    /// instead of the adaptive one. [default: adaptive, see --flush-target-p99]
    #[arg(long, value_name = "DURATION")]
    flush_interval: Option<String>,
    /// Adaptive group commit: each shard picks its commit interval to keep the p99
    /// commit wait under this, e.g. 2ms; off for the fixed --flush-interval.
    /// [default: 2ms]
    #[arg(long, value_name = "DURATION")]
    flush_target_p99: Option<String>,
    /// fsync (durable acks) or write-only (comparison runs only). [default: fsync]
    #[arg(long, value_name = "MODE")]
    flush_mode: Option<String>,
    /// Start a group commit early once this many bytes wait for it. [default: 16777216]
    #[arg(long, value_name = "BYTES")]
    flush_bytes: Option<u64>,
    /// Poll this long for work before an idle shard sleeps, e.g. 200us; 0 on a machine
    /// shared with other work (tuning/shared.toml). [default: 500us]
    #[arg(long, value_name = "DURATION")]
    spin_before_park: Option<String>,
    /// Create topics on first use. [default: true]
    #[arg(long, value_name = "BOOL")]
    auto_create_topics: Option<bool>,
    /// Partitions of auto-created topics. [default: 1]
    #[arg(long, value_name = "N")]
    default_partitions: Option<u32>,
    /// Log filter, e.g. info, debug, weir=debug. [default: info]
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
    /// Log lines as plain text (coloured only on a terminal) or one JSON object each. [default: text]
    #[arg(long, value_name = "text|json")]
    log_format: Option<String>,
    /// Where /metrics (Prometheus), /health and /ready are served, or off. [default: 0.0.0.0:9644]
    #[arg(long, value_name = "HOST:PORT")]
    metrics_listen: Option<String>,
    /// Largest request accepted; larger closes the connection. [default: 104857600]
    #[arg(long, value_name = "BYTES")]
    max_request_bytes: Option<usize>,
    /// Largest record batch accepted. [default: 1048576]
    #[arg(long, value_name = "BYTES")]
    message_max_bytes: Option<usize>,
    /// Batch cache memory per shard. [default: 268435456]
    #[arg(long, value_name = "BYTES")]
    cache_bytes: Option<usize>,
    /// Segment size. [default: 1073741824]
    #[arg(long, value_name = "BYTES")]
    segment_bytes: Option<u64>,
    /// Request bytes a shard holds unanswered before it stops reading sockets. [default: 268435456]
    #[arg(long, value_name = "BYTES")]
    inflight_bytes: Option<usize>,
    /// Close connections silent for this long, e.g. 10m. [default: 10m]
    #[arg(long, value_name = "DURATION")]
    idle_timeout: Option<String>,
    /// Delete a partition's oldest segments once everything in them is older than
    /// this, e.g. 7d (Kafka's retention.ms). [default: 7d]
    #[arg(long, value_name = "DURATION")]
    retention: Option<String>,
    /// Delete a partition's oldest segments while it holds more than this many bytes
    /// without them (Kafka's retention.bytes). [default: no limit]
    #[arg(long, value_name = "BYTES")]
    retention_bytes: Option<u64>,
    /// Bytes per second one shard's log compaction may read plus write, 0 for no limit
    /// (Kafka's log.cleaner.io.max.bytes.per.second). [default: 33554432, 32 MiB/s]
    #[arg(long, value_name = "BYTES")]
    compaction_rate: Option<u64>,
    /// Bytes of deleted segments' files each shard keeps to reuse for new segments, 0 to
    /// delete them (new segments then grow by writing zeros ahead).
    /// [default: 4294967296, 4 GiB]
    #[arg(long, value_name = "BYTES")]
    recycle_bytes: Option<u64>,
    /// Bytes per second a shard frees when it deletes segment files it does not keep,
    /// 0 for at once. [default: 8388608, 8 MiB/s]
    #[arg(long, value_name = "BYTES")]
    delete_rate: Option<u64>,
    /// This host's node id (Kafka's node.id); its shards are Kafka nodes
    /// N × 1024 + shard. [default: 0]
    #[arg(long, value_name = "N")]
    node_id: Option<u32>,
    /// The controller quorum, e.g. 1@10.0.0.1:9091,2@10.0.0.2:9091,3@10.0.0.3:9091
    /// (Kafka's controller.quorum.voters). Without it the host is a cluster of one.
    #[arg(long, value_name = "ID@HOST:PORT,...")]
    controller_quorum_voters: Option<String>,
    /// Where this host's controller listens. [default: its entry in the voter list]
    #[arg(long, value_name = "HOST:PORT")]
    controller_listen: Option<String>,
    /// broker, controller or broker,controller (Kafka's process.roles).
    /// [default: broker, plus controller when the node id is a voter]
    #[arg(long, value_name = "ROLES")]
    process_roles: Option<String>,
    /// A host that has not heartbeaten to the controller for this long is fenced
    /// (Kafka's broker.session.timeout.ms, 9s there). [default: 3s]
    #[arg(long, value_name = "DURATION")]
    session_timeout: Option<String>,
    /// Replicas of auto-created topics and of CreateTopics with -1 (Kafka's
    /// default.replication.factor). [default: 1]
    #[arg(long, value_name = "N")]
    default_replication_factor: Option<u32>,
    /// A follower not caught up for this long leaves the ISR (Kafka's
    /// replica.lag.time.max.ms). [default: 10s]
    #[arg(long, value_name = "DURATION")]
    replica_lag_time_max: Option<String>,
    /// Also serve TLS (Kafka's SSL protocol): shard 0 here, shard n on port + n.
    /// Needs --tls-cert and --tls-key; the certificate must name the advertised host.
    #[arg(long, value_name = "HOST:PORT")]
    tls_listen: Option<String>,
    /// The TLS certificate chain, PEM, leaf first.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The TLS private key, PEM.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS.
    #[arg(long, value_name = "FILE")]
    tls_client_ca: Option<PathBuf>,
    /// Require a SASL login on every listener with one of these mechanisms
    /// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; comma-separated).
    #[arg(long, value_name = "LIST")]
    sasl_mechanisms: Option<String>,
    /// Create or update this user's SCRAM credentials at start (repeatable). The first
    /// is also who this host's followers log in as on other hosts.
    #[arg(long, value_name = "NAME:PASSWORD")]
    sasl_user: Vec<String>,
    /// `acl`: enforce ACLs on every API (`weir acls`); `none` (the default) lets every
    /// client do everything.
    #[arg(long, value_name = "acl|none")]
    authorizer: Option<String>,
    /// Principals that bypass the ACLs, e.g. "User:admin;User:ops".
    #[arg(long, value_name = "PRINCIPALS")]
    super_users: Option<String>,
}

impl ServeArgs {
    fn overrides(self) -> (Option<PathBuf>, ConfigOverrides) {
        (
            self.config,
            ConfigOverrides {
                listen: self.listen,
                advertise: self.advertise,
                data_dir: self.data_dir,
                shards: self.shards,
                cores: self.cores,
                flush_interval: self.flush_interval,
                flush_target_p99: self.flush_target_p99,
                flush_mode: self.flush_mode,
                flush_bytes: self.flush_bytes,
                spin_before_park: self.spin_before_park,
                auto_create_topics: self.auto_create_topics,
                default_partitions: self.default_partitions,
                log_level: self.log_level,
                log_format: self.log_format,
                metrics_listen: self.metrics_listen,
                max_request_bytes: self.max_request_bytes,
                message_max_bytes: self.message_max_bytes,
                cache_bytes: self.cache_bytes,
                segment_bytes: self.segment_bytes,
                inflight_bytes: self.inflight_bytes,
                idle_timeout: self.idle_timeout,
                retention: self.retention,
                retention_bytes: self.retention_bytes,
                compaction_rate: self.compaction_rate,
                recycle_bytes: self.recycle_bytes,
                delete_rate: self.delete_rate,
                node_id: self.node_id,
                controller_quorum_voters: self.controller_quorum_voters,
                controller_listen: self.controller_listen,
                process_roles: self.process_roles,
                session_timeout: self.session_timeout,
                default_replication_factor: self.default_replication_factor,
                replica_lag_time_max: self.replica_lag_time_max,
                tls_listen: self.tls_listen,
                tls_cert: self.tls_cert,
                tls_key: self.tls_key,
                tls_client_ca: self.tls_client_ca,
                sasl_mechanisms: self.sasl_mechanisms,
                sasl_user: (!self.sasl_user.is_empty()).then_some(self.sasl_user),
                authorizer: self.authorizer,
                super_users: self.super_users,
            },
        )
    }
}

fn admin(
    broker: &BrokerAddress,
    run: impl FnOnce(&mut Admin) -> Result<String, AdminError>,
) -> anyhow::Result<()> {
    let bootstrap = &broker.bootstrap;
    let login = broker.login()?;
    let hint = match login {
        None => " (if it requires SASL, log in with --sasl-user NAME:PASSWORD)",
        Some(_) => "",
    };
    let mut session = Admin::connect(bootstrap, login)
        .with_context(|| format!("connecting to {bootstrap}{hint}"))?;
    print!("{}", run(&mut session)?);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = match Cli::parse().command {
        Command::Serve(args) => args,
        Command::Topics { broker, command } => {
            return admin(&broker, |a| match command {
                TopicsCommand::List => a.topics_list(),
                TopicsCommand::Create {
                    name,
                    partitions,
                    replication_factor,
                    configs,
                } => a.topics_create(&name, partitions, replication_factor, &configs),
                TopicsCommand::Describe { name } => a.topics_describe(&name),
                TopicsCommand::Delete { name } => a.topics_delete(&name),
                TopicsCommand::AlterConfig { name, set, delete } => {
                    a.topics_alter_config(&name, &set, &delete)
                }
                TopicsCommand::AddPartitions { name, partitions } => {
                    a.topics_add_partitions(&name, partitions)
                }
                TopicsCommand::DeleteRecords {
                    name,
                    partition,
                    before,
                } => a.topics_delete_records(&name, partition, before),
            })
        }
        Command::Cluster {
            command:
                ClusterCommand::Drain {
                    node,
                    reassign,
                    undo,
                    controller,
                },
        } => {
            let version = cluster_status::drain(&controller, node, !undo, reassign)
                .with_context(|| format!("asking controller {controller}"))?;
            let what = if undo {
                "no longer drained"
            } else {
                "drained: it leads nothing"
            };
            println!("host {node} {what} (metadata version {version})");
            if reassign {
                let status = cluster_status::fetch(&controller)
                    .with_context(|| format!("asking controller {controller}"))?;
                println!("{}", cluster_status::moves_off(&status, node));
            }
            return Ok(());
        }
        Command::Cluster {
            command: ClusterCommand::RebalanceLeaders { controller },
        } => {
            let version = cluster_status::rebalance_leaders(&controller)
                .with_context(|| format!("asking controller {controller}"))?;
            println!("leadership handed back to preferred replicas (metadata version {version})");
            return Ok(());
        }
        Command::Cluster {
            command: ClusterCommand::Status { controller, json },
        } => {
            let status = cluster_status::fetch(&controller)
                .with_context(|| format!("asking controller {controller}"))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{}", cluster_status::render(&status));
            }
            return Ok(());
        }
        Command::Acls { broker, command } => {
            return admin(&broker, |a| match command {
                AclsCommand::Add(spec) => a.acls_add(&spec),
                AclsCommand::List(spec) => a.acls_list(&spec),
                AclsCommand::Remove(spec) => a.acls_remove(&spec),
            })
        }
        Command::Users { broker, command } => {
            return admin(&broker, |a| match command {
                UsersCommand::List => a.users_list(),
                UsersCommand::Create {
                    name,
                    password,
                    iterations,
                } => a.users_create(&name, &password, iterations),
                UsersCommand::Delete { name } => a.users_delete(&name),
            })
        }
        Command::Groups { broker, command } => {
            return admin(&broker, |a| match command {
                GroupsCommand::List => a.groups_list(),
                GroupsCommand::Describe { group } => a.groups_describe(&group),
                GroupsCommand::ResetOffsets {
                    group,
                    topic,
                    to_earliest,
                    to_latest,
                    to_offset,
                } => {
                    let target = match (to_earliest, to_latest, to_offset) {
                        (true, _, _) => ResetTarget::Earliest,
                        (_, true, _) => ResetTarget::Latest,
                        (_, _, Some(n)) => ResetTarget::Offset(n),
                        _ => {
                            return Err(AdminError::Refused(
                                "say where to: --to-earliest, --to-latest or --to-offset N".into(),
                            ))
                        }
                    };
                    a.groups_reset_offsets(&group, &topic, target)
                }
            })
        }
    };
    let (file, flags) = args.overrides();
    let from_file = match &file {
        Some(path) => ConfigOverrides::from_file(path)?,
        None => ConfigOverrides::default(),
    };
    let config = BrokerConfig::default().apply(flags.over(from_file))?;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&config.log_level));
    match config.log_format {
        LogFormat::Json => logs.json().init(),
        // Colour codes only where a terminal will render them, not in files.
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .init(),
    }
    tracing::debug!(?config, "configuration");
    let stop = weir::shard::signals::stop_on_signals().context("installing signal handling")?;
    weir::shard::run(config, stop).context("broker stopped")?;
    tracing::info!("stopped cleanly");
    Ok(())
}
