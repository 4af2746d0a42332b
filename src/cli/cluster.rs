//! `weir cluster`: the controller quorum and the hosts, leadership rebalancing and
//! draining a host before maintenance.

use anyhow::Context;
use clap::Subcommand;
use weir::admin::cluster_status;

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

impl Cluster {
    /// Runs the subcommand against the controller.
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            ClusterCommand::Status { controller, json } => {
                let status = cluster_status::fetch(&controller)
                    .with_context(|| format!("asking controller {controller}"))?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&status)?);
                } else {
                    print!("{}", cluster_status::render(&status));
                }
            }
            ClusterCommand::RebalanceLeaders { controller } => {
                let version = cluster_status::rebalance_leaders(&controller)
                    .with_context(|| format!("asking controller {controller}"))?;
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
            }
        }
        Ok(())
    }
}
