//! The `weir` command line: one file per subcommand, each parsing its own arguments and
//! running itself.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod acls;
mod broker;
mod cluster;
mod groups;
mod serve;
mod topics;
mod transactions;
mod users;

/// weir: a Kafka-wire-compatible, thread-per-core message broker.
#[derive(Parser)]
#[command(name = "weir", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker. Every option can also be set in the TOML file given with
    /// --config (same names, e.g. `flush-interval = "5ms"`); a flag wins over the file.
    Serve(Box<serve::Serve>),
    /// Manage topics on a running broker.
    Topics(topics::Topics),
    /// Inspect consumer groups and reset their offsets on a running broker.
    Groups(groups::Groups),
    /// Inspect transactions and abort a hanging one on a running broker.
    Transactions(transactions::Transactions),
    /// Manage SASL/SCRAM users on a running broker.
    Users(users::Users),
    /// Manage ACLs on a running broker (enforced with `weir serve --authorizer acl`).
    Acls(acls::Acls),
    /// Inspect the cluster: the controller quorum and the hosts.
    Cluster(cluster::Cluster),
}

/// Parses the command line and runs the command it names.
pub fn run() -> anyhow::Result<()> {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match cli.command {
        Command::Serve(serve) => serve.run(matches.subcommand_matches("serve")),
        Command::Topics(topics) => topics.run(),
        Command::Groups(groups) => groups.run(),
        Command::Transactions(transactions) => transactions.run(),
        Command::Users(users) => users.run(),
        Command::Acls(acls) => acls.run(),
        Command::Cluster(cluster) => cluster.run(),
    }
}
