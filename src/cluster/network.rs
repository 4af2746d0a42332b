//! openraft's network: a voter reaches another voter through an [`rpc::Client`] of
//! its controller address (in mutual TLS when the hosts have controller certificates).
//! Any transport failure is reported as unreachable, so
//! openraft backs off and retries.

use openraft::{
    error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable},
    network::{RPCOption, RaftNetwork, RaftNetworkFactory},
    raft::{
        AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest,
        InstallSnapshotResponse, VoteRequest, VoteResponse,
    },
    BasicNode,
};

use super::{
    peer_tls::PeerTls,
    rpc::{self, Request, Response},
    TypeConfig,
};

type NodeId = u64;

/// Makes a [`Peer`] per target voter.
pub struct Network {
    /// The controller channel's TLS, if the hosts have certificates.
    pub tls: Option<PeerTls>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        Peer {
            target,
            client: rpc::Client::new(node.addr.clone(), self.tls.clone()),
        }
    }
}

/// One other voter.
pub struct Peer {
    target: NodeId,
    client: rpc::Client,
}

impl Peer {
    async fn call<E: std::error::Error>(
        &mut self,
        request: Request,
        option: &RPCOption,
    ) -> Result<Response, RPCError<NodeId, BasicNode, E>> {
        self.client
            .call(&request, option.hard_ttl())
            .await
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))
    }
}

fn remote<E: std::error::Error>(
    target: NodeId,
    e: RaftError<NodeId, E>,
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    RPCError::RemoteError(RemoteError::new(target, e))
}

fn wrong<E: std::error::Error>(response: &Response) -> RPCError<NodeId, BasicNode, E> {
    RPCError::Network(NetworkError::new(&rpc::unexpected(response)))
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        match self.call(Request::AppendEntries(rpc), &option).await? {
            Response::AppendEntries(r) => r.map_err(|e| remote(self.target, e)),
            other => Err(wrong(&other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        match self.call(Request::InstallSnapshot(rpc), &option).await? {
            Response::InstallSnapshot(r) => r.map_err(|e| remote(self.target, e)),
            other => Err(wrong(&other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        match self.call(Request::Vote(rpc), &option).await? {
            Response::Vote(r) => r.map_err(|e| remote(self.target, e)),
            other => Err(wrong(&other)),
        }
    }
}
