//! `weir topics`: create, describe, change and delete topics on a running broker.

use clap::Subcommand;

use super::broker::BrokerAddress;

/// `weir topics`.
#[derive(clap::Args)]
pub struct Topics {
    #[command(flatten)]
    broker: BrokerAddress,
    #[command(subcommand)]
    command: TopicsCommand,
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

impl Topics {
    /// Runs the subcommand against the broker.
    pub fn run(self) -> anyhow::Result<()> {
        self.broker.admin(|a| match self.command {
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
}
