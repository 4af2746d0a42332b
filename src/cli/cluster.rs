//! `weir cluster`: the controller quorum and the hosts, leadership rebalancing,
//! draining a host before maintenance, and adding or removing voters.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use weir::{
    admin::cluster_status::{self, ControllerAddr},
    cluster::peer_tls::PeerTlsFiles,
};

/// `weir cluster`.
#[derive(clap::Args)]
pub struct Cluster {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// The voters, the Raft leader and term, and every host with its shards, state,
    /// last heartbeat and partition count.
    Status {
        #[command(flatten)]
        controller: Controller,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Hand every partition's leadership back to its preferred (first) replica where
    /// that one is live and in sync (the controller also does so by itself after 10s
    /// without hosts coming or going).
    RebalanceLeaders {
        #[command(flatten)]
        controller: Controller,
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
        #[command(flatten)]
        controller: Controller,
    },
    /// Make a running controller a voter (KIP-853's add-controller): start it first with
    /// `weir serve --process-roles broker,controller` (or controller) and its own
    /// --controller-listen; it copies the metadata log, then the voter set changes.
    AddVoter {
        /// Its node id.
        #[arg(long)]
        node: u64,
        /// Its controller address, as the other voters reach it.
        #[arg(long, value_name = "HOST:PORT")]
        address: String,
        #[command(flatten)]
        controller: Controller,
    },
    /// Take a voter out of the controller quorum (KIP-853's remove-controller); the
    /// last voter stays. To replace a voter's disk: remove it, start it on an empty
    /// data directory, and add it again.
    RemoveVoter {
        /// Its node id.
        #[arg(long)]
        node: u64,
        #[command(flatten)]
        controller: Controller,
    },
}

/// Which controller to ask, and how.
#[derive(clap::Args)]
struct Controller {
    /// Any voter's controller address.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9091")]
    controller: String,
    /// A certificate (PEM) the hosts' controller CA signed, when the hosts run the
    /// controller channel in mutual TLS (their --controller-tls-*).
    #[arg(long, value_name = "FILE", requires_all = ["controller_tls_key", "controller_tls_ca"])]
    controller_tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, value_name = "FILE", requires = "controller_tls_cert")]
    controller_tls_key: Option<PathBuf>,
    /// The hosts' controller CA (PEM).
    #[arg(long, value_name = "FILE", requires = "controller_tls_cert")]
    controller_tls_ca: Option<PathBuf>,
}

impl Controller {
    /// The address, with the TLS configuration loaded from the files.
    fn addr(&self) -> anyhow::Result<ControllerAddr> {
        let tls = match (
            &self.controller_tls_cert,
            &self.controller_tls_key,
            &self.controller_tls_ca,
        ) {
            (Some(cert), Some(key), Some(ca)) => Some(
                PeerTlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    ca: ca.clone(),
                }
                .load()
                .context("loading the controller TLS files")?,
            ),
            _ => None,
        };
        Ok(ControllerAddr {
            addr: self.controller.clone(),
            tls,
        })
    }
}

impl Cluster {
    /// Runs the subcommand against the controller.
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            ClusterCommand::Status { controller, json } => {
                let controller = controller.addr()?;
                let status = cluster_status::fetch(&controller)
                    .with_context(|| format!("asking controller {}", controller.addr))?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&status)?);
                } else {
                    print!("{}", cluster_status::render(&status));
                }
            }
            ClusterCommand::RebalanceLeaders { controller } => {
                let controller = controller.addr()?;
                let version = cluster_status::rebalance_leaders(&controller)
                    .with_context(|| format!("asking controller {}", controller.addr))?;
                println!(
                    "leadership handed back to preferred replicas (metadata version {version})"
                );
            }
            ClusterCommand::Drain {
                node,
                reassign,
                undo,
                controller,
            } => {
                let controller = controller.addr()?;
                let version = cluster_status::drain(&controller, node, !undo, reassign)
                    .with_context(|| format!("asking controller {}", controller.addr))?;
                let what = if undo {
                    "no longer drained"
                } else {
                    "drained: it leads nothing"
                };
                println!("host {node} {what} (metadata version {version})");
                if reassign {
                    let status = cluster_status::fetch(&controller)
                        .with_context(|| format!("asking controller {}", controller.addr))?;
                    println!("{}", cluster_status::moves_off(&status, node));
                }
            }
            ClusterCommand::AddVoter {
                node,
                address,
                controller,
            } => {
                let controller = controller.addr()?;
                let voters = cluster_status::add_voter(&controller, node, &address)
                    .with_context(|| format!("asking controller {}", controller.addr))?;
                println!("voters: {}", voter_list(&voters));
            }
            ClusterCommand::RemoveVoter { node, controller } => {
                let controller = controller.addr()?;
                let voters = cluster_status::remove_voter(&controller, node)
                    .with_context(|| format!("asking controller {}", controller.addr))?;
                println!("voters: {}", voter_list(&voters));
            }
        }
        Ok(())
    }
}

/// `ID@HOST:PORT,…`, as --controller-quorum-voters takes them.
fn voter_list(voters: &[(u64, String)]) -> String {
    voters
        .iter()
        .map(|(id, addr)| format!("{id}@{addr}"))
        .collect::<Vec<_>>()
        .join(",")
}
