//! `weir groups`: consumer groups on a running broker, and resetting their offsets.

use clap::Subcommand;
use weir::admin::commands::{AdminError, ResetTarget};

use super::broker::BrokerAddress;

/// `weir groups`.
#[derive(clap::Args)]
pub struct Groups {
    #[command(flatten)]
    broker: BrokerAddress,
    #[command(subcommand)]
    command: GroupsCommand,
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

impl Groups {
    /// Runs the subcommand against the broker.
    pub fn run(self) -> anyhow::Result<()> {
        self.broker.admin(|a| match self.command {
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
}
