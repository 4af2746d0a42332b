//! `weir transactions`: the transactions of a running broker or cluster.

use clap::Subcommand;

use super::broker::BrokerAddress;

/// `weir transactions`.
#[derive(clap::Args)]
pub struct Transactions {
    #[command(flatten)]
    broker: BrokerAddress,
    #[command(subcommand)]
    command: TransactionsCommand,
}

#[derive(Subcommand)]
enum TransactionsCommand {
    /// List transactional ids with their producer ids, states and coordinators.
    List,
    /// Show a transactional id's state, producer, timeout, age and partitions.
    Describe {
        /// Transactional id.
        id: String,
    },
    /// Abort the id's open transaction (as a new producer instance would: its current
    /// producer is fenced).
    Abort {
        /// Transactional id.
        id: String,
    },
}

impl Transactions {
    /// Runs the subcommand against the broker.
    pub fn run(self) -> anyhow::Result<()> {
        self.broker.admin(|a| match self.command {
            TransactionsCommand::List => a.transactions_list(),
            TransactionsCommand::Describe { id } => a.transactions_describe(&id),
            TransactionsCommand::Abort { id } => a.transactions_abort(&id),
        })
    }
}
