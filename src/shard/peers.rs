//! How a shard reaches another node of the cluster as a client: the node's address and
//! the dialer (plain, logged in as the host's replica user where SASL is required).
//! Replica fetches and transaction markers go this way.

use weir_client::dialer::Dialer;

use super::context::ShardContext;
use crate::metadata::placement::{host_of, shard_of, NodeId};

impl ShardContext {
    /// `host:port` of `node`'s plaintext listener, from the metadata.
    pub fn node_addr(&self, node: NodeId) -> Option<String> {
        let snapshot = self.metadata();
        let host = snapshot.view.hosts.get(&host_of(node))?;
        let port = u32::from(host.port) + shard_of(node).0 as u32;
        Some(format!("{}:{port}", host.advertise))
    }

    /// The dialer a shard connects to its peers with: where SASL is required, it logs
    /// in as the host's first `--sasl-user`.
    pub fn peer_dialer(&self) -> Dialer {
        self.config.peer_dialer()
    }
}
