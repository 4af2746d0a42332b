//! `weir acls`: add, list and remove ACLs on a running broker.

use clap::Subcommand;
use weir::admin::acls::AclSpec;

use super::broker::BrokerAddress;

/// `weir acls`.
#[derive(clap::Args)]
pub struct Acls {
    #[command(flatten)]
    broker: BrokerAddress,
    #[command(subcommand)]
    command: AclsCommand,
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

impl Acls {
    /// Runs the subcommand against the broker.
    pub fn run(self) -> anyhow::Result<()> {
        self.broker.admin(|a| match self.command {
            AclsCommand::Add(spec) => a.acls_add(&spec),
            AclsCommand::List(spec) => a.acls_list(&spec),
            AclsCommand::Remove(spec) => a.acls_remove(&spec),
        })
    }
}
