//! `weir users`: SASL/SCRAM credentials on a running broker.

use clap::Subcommand;

use super::broker::BrokerAddress;

/// `weir users`.
#[derive(clap::Args)]
pub struct Users {
    #[command(flatten)]
    broker: BrokerAddress,
    #[command(subcommand)]
    command: UsersCommand,
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

impl Users {
    /// Runs the subcommand against the broker.
    pub fn run(self) -> anyhow::Result<()> {
        self.broker.admin(|a| match self.command {
            UsersCommand::List => a.users_list(),
            UsersCommand::Create {
                name,
                password,
                iterations,
            } => a.users_create(&name, &password, iterations),
            UsersCommand::Delete { name } => a.users_delete(&name),
        })
    }
}
