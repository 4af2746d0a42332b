//! The controller's wire protocol: a request and its response as JSON, each framed by
//! a 4-byte big-endian length, over one TCP connection per caller (in mutual TLS when
//! the hosts have controller certificates, see `peer_tls`); requests on a connection
//! are answered in order. It carries Raft's own messages between voters and the hosts'
//! registrations, heartbeats, metadata changes and status queries.

use std::time::Duration;

use openraft::{
    error::{InstallSnapshotError, RaftError},
    raft::{
        AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest,
        InstallSnapshotResponse, VoteRequest, VoteResponse,
    },
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
};

use super::{peer_tls::PeerTls, TypeConfig};
use crate::{
    metadata::{
        cluster_state::{ClusterState, HostRecord, MetadataChange, MetadataError},
        controller_link::QuorumStatus,
        registry::TopicInfo,
    },
    replication::lag_report::PartitionLag,
};

/// Largest frame accepted (a snapshot of a very large cluster's metadata fits).
pub const FRAME_BYTES_MAX: usize = 64 << 20;

/// A host introducing itself to the controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Registration {
    /// Its node id.
    pub host: u32,
    /// Its endpoints and shards.
    pub record: HostRecord,
    /// The cluster its data directory belongs to, if it ever joined one.
    pub cluster_id: Option<String>,
    /// Its `--controller-quorum-voters`, as `voters_text` writes it.
    pub voters: String,
    /// Topics of a single-host data directory joining a cluster for the first time:
    /// they stay on this host.
    pub legacy_topics: Vec<TopicInfo>,
}

/// A host's heartbeat, which also asks for metadata newer than `known_version`: the
/// controller holds it until there is some or a poll interval passed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Its node id.
    pub host: u32,
    /// The incarnation it registered with.
    pub incarnation: u64,
    /// The metadata version it has.
    pub known_version: u64,
    /// The host is stopping (Kafka's controlled shutdown): fence it now, so its
    /// leadership moves before it goes, and do not unfence it for this heartbeat.
    #[serde(default)]
    pub shutting_down: bool,
    /// The partitions it leads whose slowest follower is behind, and by how much.
    #[serde(default)]
    pub lagging: Vec<PartitionLag>,
}

/// The controller's answer to a heartbeat.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// The controller's metadata version.
    pub version: u64,
    /// The metadata, when newer than the host's.
    pub state: Option<ClusterState>,
    /// The controller leader's host node id.
    pub leader: u32,
}

/// One host as `weir cluster status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostStatus {
    /// Its node id.
    pub host: u32,
    /// Its registration.
    pub record: HostRecord,
    /// Milliseconds since its last heartbeat reached the leader (none yet: `None`).
    pub heartbeat_age_ms: Option<u64>,
    /// Partitions placed on it.
    pub partitions: usize,
    /// A voter of the quorum.
    pub voter: bool,
}

/// The quorum and the hosts, as the controller leader sees them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterStatus {
    /// The cluster's id.
    pub cluster_id: String,
    /// The voters: id and controller address.
    pub voters: Vec<(u64, String)>,
    /// The leader's id.
    pub leader: u64,
    /// The leader's term.
    pub term: u64,
    /// The last log index applied.
    pub version: u64,
    /// Every registered host.
    pub hosts: Vec<HostStatus>,
    /// Topics and partitions.
    pub topics: usize,
    /// Partitions whose ISR lacks a replica, that have no leader, whose replicas are
    /// moving, or whose followers are behind.
    #[serde(default)]
    pub degraded: Vec<PartitionStatus>,
    /// The quorum's replication (DescribeQuorum).
    #[serde(default)]
    pub quorum: QuorumStatus,
}

/// A partition as the controller records it, for `weir cluster status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartitionStatus {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// Its state: replicas, leader, epoch, ISR.
    pub state: crate::metadata::partition_state::PartitionState,
    /// Offsets its slowest follower lacks, as its leader last reported (0: none).
    #[serde(default)]
    pub lag: u64,
}

/// A request to a controller.
#[derive(Debug, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum Request {
    /// Raft: replicate entries.
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    /// Raft: ask for a vote.
    Vote(VoteRequest<u64>),
    /// Raft: a chunk of a snapshot.
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A host registers.
    Register(Registration),
    /// A host heartbeats (and long-polls for metadata).
    Heartbeat(Heartbeat),
    /// A host asks for a metadata change.
    Change(MetadataChange),
    /// `weir cluster status`.
    Status,
    /// `weir cluster add-voter`: the controller `id` (running, not yet a voter) at
    /// `address` joins the quorum.
    AddVoter {
        /// Its host id.
        id: u64,
        /// Its controller address, `HOST:PORT`.
        address: String,
    },
    /// `weir cluster remove-voter`.
    RemoveVoter {
        /// The voter's host id.
        id: u64,
    },
}

/// A controller's response, one variant per request.
#[derive(Debug, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum Response {
    /// To [`Request::AppendEntries`].
    AppendEntries(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    /// To [`Request::Vote`].
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    /// To [`Request::InstallSnapshot`].
    InstallSnapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    /// To [`Request::Register`]: the cluster id.
    Registered(Result<String, MetadataError>),
    /// To [`Request::Heartbeat`].
    Heartbeat(Result<HeartbeatReply, MetadataError>),
    /// To [`Request::Change`]: the log index that applied it.
    Changed(Result<u64, MetadataError>),
    /// To [`Request::Status`].
    Status(Result<ClusterStatus, MetadataError>),
    /// To [`Request::AddVoter`] and [`Request::RemoveVoter`]: the voters after the
    /// change, id and controller address.
    VotersChanged(Result<Vec<(u64, String)>, MetadataError>),
}

/// Writes one frame.
pub async fn write_frame<T: Serialize>(
    stream: &mut (impl AsyncWrite + Unpin),
    value: &T,
) -> std::io::Result<()> {
    let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame).await
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub async fn read_frame<T: DeserializeOwned>(
    stream: &mut (impl AsyncRead + Unpin),
) -> std::io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > FRAME_BYTES_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes is over {FRAME_BYTES_MAX}"),
        ));
    }
    // Grown as bytes arrive, so a length claimed but never sent costs nothing.
    let mut body = Vec::with_capacity(len.min(64 << 10));
    (&mut *stream)
        .take(len as u64)
        .read_to_end(&mut body)
        .await?;
    if body.len() != len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("frame cut short at {} of {len} bytes", body.len()),
        ));
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// A byte stream to or from a controller: TCP, or TLS over it.
pub trait Channel: AsyncRead + AsyncWrite + Unpin + Send + Sync {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Channel for T {}

/// A connection to one controller, opened on first use and again after any failure.
pub struct Client {
    addr: String,
    tls: Option<PeerTls>,
    stream: Option<Box<dyn Channel>>,
}

impl Client {
    /// A client of the controller at `addr` (not yet connected), over mutual TLS when
    /// `tls` is given.
    pub fn new(addr: impl Into<String>, tls: Option<PeerTls>) -> Client {
        Client {
            addr: addr.into(),
            tls,
            stream: None,
        }
    }

    /// The controller's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `request` and waits for its response, for at most `timeout`. On any
    /// failure the connection is dropped, so the next call starts afresh.
    pub async fn call(
        &mut self,
        request: &Request,
        timeout: Duration,
    ) -> std::io::Result<Response> {
        let result = tokio::time::timeout(timeout, self.exchange(request)).await;
        match result {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => {
                self.stream = None;
                Err(e)
            }
            Err(_) => {
                self.stream = None;
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("controller {} did not answer within {timeout:?}", self.addr),
                ))
            }
        }
    }

    async fn exchange(&mut self, request: &Request) -> std::io::Result<Response> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(&self.addr).await?;
            stream.set_nodelay(true)?;
            self.stream = Some(match &self.tls {
                None => Box::new(stream),
                Some(tls) => Box::new(tls.connect(&self.addr, stream).await?),
            });
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(std::io::Error::other("not connected"));
        };
        write_frame(stream, request).await?;
        let plain = self.tls.is_none();
        read_frame(stream).await?.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                if plain {
                    "the controller closed the connection (one whose channel is in mutual \
                     TLS closes plain ones: give the hosts' --controller-tls-* files)"
                } else {
                    "the controller closed the connection"
                },
            )
        })
    }
}

/// An answer of the wrong kind: a protocol error between two weir versions.
pub fn unexpected(response: &Response) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("unexpected controller response {response:?}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `bytes` to a fresh loopback connection, closes it, and reads one frame.
    fn read_sent(bytes: Vec<u8>) -> std::io::Result<Option<Request>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let writer = tokio::spawn(async move {
                let mut s = TcpStream::connect(addr).await?;
                s.write_all(&bytes).await?;
                s.shutdown().await
            });
            let (mut stream, _) = listener.accept().await?;
            let read = read_frame::<Request>(&mut stream).await;
            writer.await.map_err(std::io::Error::other)??;
            read
        })
    }

    #[test]
    fn frames_round_trip_and_bad_ones_are_refused() {
        let body = serde_json::to_vec(&Request::Status).expect("json");
        let mut good = (body.len() as u32).to_be_bytes().to_vec();
        good.extend_from_slice(&body);
        assert!(matches!(read_sent(good), Ok(Some(Request::Status))));
        assert!(matches!(read_sent(Vec::new()), Ok(None)), "a clean end");
        let mut short = 1000u32.to_be_bytes().to_vec();
        short.extend_from_slice(b"{\"Sta");
        let e = read_sent(short).expect_err("cut short");
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        let huge = (FRAME_BYTES_MAX as u32 + 1).to_be_bytes().to_vec();
        let e = read_sent(huge).expect_err("too long");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        let mut garbage = 4u32.to_be_bytes().to_vec();
        garbage.extend_from_slice(b"nope");
        let e = read_sent(garbage).expect_err("not JSON");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    }
}
