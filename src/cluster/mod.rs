//! The cluster: a controller quorum on openraft replicating the metadata
//! (`metadata::cluster_state`), and on every host an agent that registers the host,
//! heartbeats, installs the metadata the controller publishes and forwards the
//! host's metadata changes.
//!
//! - [`config`]: the host's cluster settings (node id, voters, roles).
//! - [`store`]: the Raft log and the state machine, in LMDB.
//! - [`rpc`]: the controller's wire protocol (Raft's messages and the hosts' requests).
//! - [`peer_tls`]: that protocol's mutual TLS between hosts.
//! - [`network`]: openraft's network over [`rpc`].
//! - [`controller`]: a voter: the Raft node, its listener, fencing.
//! - [`agent`]: a host's side: registration, heartbeats, forwarded changes.
//! - [`runtime`]: the thread (and tokio runtime) the controller and the agent run on,
//!   off the shards' reactors.

pub mod agent;
pub mod config;
pub mod controller;

pub mod network;
pub mod peer_tls;
pub mod rpc;
pub mod runtime;

pub mod store;

use crate::metadata::cluster_state::{Command, MetadataError};

openraft::declare_raft_types!(
    /// The controller quorum's Raft types: commands are metadata changes, node ids are
    /// host node ids, a node's address is its controller listener.
    pub TypeConfig:
        D = Command,
        R = Result<(), MetadataError>,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = std::io::Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The controller's Raft node.
pub type Raft = openraft::Raft<TypeConfig>;

/// What the controller's Raft node reports of the quorum (its leader, term, members).
pub type QuorumMetrics = openraft::RaftMetrics<u64, openraft::BasicNode>;
