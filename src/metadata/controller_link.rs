//! The way from a host's shards to the controller quorum: metadata changes to apply and
//! questions about the quorum itself, each with where its answer goes. The agent of
//! `cluster::agent` receives the calls and asks the controller leader.

use serde::{Deserialize, Serialize};

use super::{cluster_state::MetadataError, metadata_change::MetadataChange};

/// A call from a shard to the controller quorum.
pub enum ControllerCall {
    /// A metadata change, answered with the controller's log index once the change is
    /// applied there.
    Change {
        /// The change.
        change: MetadataChange,
        /// The answer.
        reply: tokio::sync::oneshot::Sender<Result<u64, MetadataError>>,
    },
    /// The quorum as its leader sees it (DescribeQuorum).
    Quorum {
        /// The answer.
        reply: tokio::sync::oneshot::Sender<Result<QuorumStatus, MetadataError>>,
    },
}

/// The sending end the registry holds.
pub type ControllerLink = tokio::sync::mpsc::UnboundedSender<ControllerCall>;

/// Now, in Unix milliseconds (the quorum's timestamps).
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The controller quorum's replication, as its leader sees it, in the terms of Kafka's
/// DescribeQuorum: the metadata log's offsets are the controller's log indexes plus
/// one (an end offset is one past the last entry held).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumStatus {
    /// The leader's host id.
    pub leader: u64,
    /// The leader's term (Kafka's leader epoch).
    pub term: u64,
    /// One past the last entry applied.
    pub high_watermark: u64,
    /// The voters, the leader among them.
    pub voters: Vec<QuorumMember>,
    /// Hosts that follow the metadata without voting.
    pub observers: Vec<QuorumMember>,
}

/// One host's place in the quorum's replication.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumMember {
    /// The host id.
    pub host: u64,
    /// One past the last entry it holds (a voter: as the leader replicated it; an
    /// observer: the metadata it last said it has); `None` when not known.
    pub log_end: Option<u64>,
    /// When the leader last heard from it, in Unix milliseconds.
    pub last_heard_ms: Option<i64>,
    /// When it last held everything the leader had, in Unix milliseconds.
    pub caught_up_ms: Option<i64>,
    /// Its controller address (`host:port`), for a voter.
    pub address: Option<String>,
}
