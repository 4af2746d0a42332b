//! `weir cluster status`: asks a controller (any voter; it follows the leader) for the
//! quorum, the hosts and the degraded partitions, and prints them as a table or as
//! JSON; `weir cluster rebalance-leaders` asks it to hand leadership back to the
//! preferred replicas; `weir cluster add-voter/remove-voter` change the quorum.

use std::{fmt::Write, time::Duration};

use crate::{
    cluster::{
        peer_tls::PeerTls,
        rpc::{self, ClusterStatus, Request, Response},
    },
    metadata::{
        cluster_state::{MetadataChange, MetadataError},
        partition_state::PartitionState,
        placement::host_of,
    },
};

/// Why the status could not be had.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// No controller answered.
    #[error("controller {addr}: {source}")]
    Io {
        /// The address tried.
        addr: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The quorum has no leader (or it answered with an error).
    #[error(transparent)]
    Controller(#[from] MetadataError),
}

/// A controller to ask: any voter's address, and the controller channel's TLS when the
/// hosts use it.
pub struct ControllerAddr {
    /// `HOST:PORT` of a voter's controller listener.
    pub addr: String,
    /// A certificate the hosts' CA signed, and that CA.
    pub tls: Option<PeerTls>,
}

/// The status, asked of `controller` and, if it is not the leader, of the leader it
/// names.
pub fn fetch(controller: &ControllerAddr) -> Result<ClusterStatus, StatusError> {
    ask_leader(controller, &Request::Status, |r| match r {
        Response::Status(answer) => Ok(answer),
        other => Err(rpc::unexpected(&other)),
    })
}

/// `weir cluster rebalance-leaders`: every partition whose preferred replica is live
/// and in sync is led by it again. Returns the metadata version that holds the change.
pub fn rebalance_leaders(controller: &ControllerAddr) -> Result<u64, StatusError> {
    let request = Request::Change(MetadataChange::PreferLeaders);
    ask_leader(controller, &request, |r| match r {
        Response::Changed(answer) => Ok(answer),
        other => Err(rpc::unexpected(&other)),
    })
}

/// `weir cluster drain --node N [--reassign] [--undo]`: host `host`'s partitions are
/// led elsewhere (and it gets no new replicas) until the drain is undone; with
/// `reassign`, its replicas also move to other live hosts. Returns the metadata version
/// that holds the change.
pub fn drain(
    controller: &ControllerAddr,
    host: u32,
    draining: bool,
    reassign: bool,
) -> Result<u64, StatusError> {
    let request = Request::Change(MetadataChange::Drain {
        host,
        draining,
        reassign,
    });
    ask_leader(controller, &request, |r| match r {
        Response::Changed(answer) => Ok(answer),
        other => Err(rpc::unexpected(&other)),
    })
}

/// `weir cluster add-voter --node ID --address HOST:PORT`: the running controller `id`
/// joins the quorum once it holds the metadata log. Returns the voters after it.
pub fn add_voter(
    controller: &ControllerAddr,
    id: u64,
    address: &str,
) -> Result<Vec<(u64, String)>, StatusError> {
    let request = Request::AddVoter {
        id,
        address: address.to_string(),
    };
    ask_leader_within(controller, &request, VOTER_CHANGE_WAIT, voters_changed)
}

/// `weir cluster remove-voter --node ID`. Returns the voters after it.
pub fn remove_voter(
    controller: &ControllerAddr,
    id: u64,
) -> Result<Vec<(u64, String)>, StatusError> {
    ask_leader_within(
        controller,
        &Request::RemoveVoter { id },
        VOTER_CHANGE_WAIT,
        voters_changed,
    )
}

fn voters_changed(
    response: Response,
) -> Result<Result<Vec<(u64, String)>, MetadataError>, std::io::Error> {
    match response {
        Response::VotersChanged(answer) => Ok(answer),
        other => Err(rpc::unexpected(&other)),
    }
}

/// How long a voter change may take: a new voter first copies the metadata log (the
/// leader gives it 30 s), then the change commits.
const VOTER_CHANGE_WAIT: Duration = Duration::from_secs(45);

/// What `drain --reassign` of host `host` started, as `status` shows it: how many of
/// its replicas move off it, and how many stay (no other live host without a replica
/// of their partition, or a move of that partition already underway).
pub fn moves_off(status: &ClusterStatus, host: u32) -> String {
    let moving = status
        .degraded
        .iter()
        .filter(|p| {
            p.state.replicas.iter().any(|n| host_of(*n) == host)
                && p.state
                    .target
                    .as_deref()
                    .is_some_and(|t| !t.iter().any(|n| host_of(*n) == host))
        })
        .count();
    let held = status
        .hosts
        .iter()
        .find(|h| h.host == host)
        .map_or(0, |h| h.partitions);
    let mut out = format!(
        "{moving} replicas moving off host {host} (each leaves once its replacement is in \
         sync; `weir cluster status` shows them)"
    );
    if held > moving {
        let _ = write!(
            out,
            "; {} stay: no other live host to take them",
            held - moving
        );
    }
    out
}

/// How long [`ask_leader`] keeps asking while the quorum has no leader (an election
/// takes a few heartbeats).
const LEADER_WAIT: Duration = Duration::from_secs(10);

/// Sends `request` to `controller`, following its redirections to the leader (and
/// asking again every 250 ms for up to [`LEADER_WAIT`] while an election leaves the
/// quorum without one, as Kafka's admin clients retry NOT_CONTROLLER), and takes the
/// answer out of the response with `answer`.
fn ask_leader<T>(
    controller: &ControllerAddr,
    request: &Request,
    answer: impl Fn(Response) -> Result<Result<T, MetadataError>, std::io::Error>,
) -> Result<T, StatusError> {
    ask_leader_within(controller, request, Duration::from_secs(5), answer)
}

/// [`ask_leader`], each answer awaited for up to `wait`.
fn ask_leader_within<T>(
    controller: &ControllerAddr,
    request: &Request,
    wait: Duration,
    answer: impl Fn(Response) -> Result<Result<T, MetadataError>, std::io::Error>,
) -> Result<T, StatusError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| StatusError::Io {
            addr: controller.addr.clone(),
            source,
        })?;
    runtime.block_on(async {
        let deadline = tokio::time::Instant::now() + LEADER_WAIT;
        let mut addr = controller.addr.clone();
        loop {
            let mut client = rpc::Client::new(addr.clone(), controller.tls.clone());
            let response = client
                .call(request, wait)
                .await
                .map_err(|source| StatusError::Io {
                    addr: addr.clone(),
                    source,
                })?;
            let leader = match answer(response) {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(MetadataError::NotLeader { leader })) => leader,
                Ok(Err(e)) => return Err(e.into()),
                Err(source) => return Err(StatusError::Io { addr, source }),
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(MetadataError::NotLeader { leader }.into());
            }
            match leader {
                Some(leader) => addr = leader,
                None => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    addr = controller.addr.clone();
                }
            }
        }
    })
}

/// The status as an operator reads it.
pub fn render(s: &ClusterStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cluster {} · controller leader {} · term {} · metadata version {} · {} topics",
        s.cluster_id, s.leader, s.term, s.version, s.topics
    );
    let _ = writeln!(out, "\nVOTER\tCONTROLLER\tROLE");
    for (id, addr) in &s.voters {
        let role = if *id == s.leader {
            "leader"
        } else {
            "follower"
        };
        let _ = writeln!(out, "{id}\t{addr}\t{role}");
    }
    let _ = writeln!(
        out,
        "\nHOST\tADDRESS\tSHARDS\tNODES\tSTATE\tLAST-HEARTBEAT\tPARTITIONS\tVOTER"
    );
    for h in &s.hosts {
        let r = &h.record;
        let first = h.host * crate::metadata::placement::SHARDS_PER_HOST;
        let _ = writeln!(
            out,
            "{}\t{}:{}\t{}\t{}-{}\t{}\t{}\t{}\t{}",
            h.host,
            r.advertise,
            r.port,
            r.shards,
            first,
            first + r.shards.saturating_sub(1),
            if r.fenced {
                "fenced"
            } else if r.draining {
                "draining"
            } else {
                "alive"
            },
            h.heartbeat_age_ms.map_or("never".to_string(), |ms| format!(
                "{:.1}s ago",
                ms as f64 / 1000.0
            )),
            h.partitions,
            if h.voter { "yes" } else { "no" },
        );
    }
    let count = |f: fn(&PartitionState) -> bool| s.degraded.iter().filter(|p| f(&p.state)).count();
    let _ = writeln!(
        out,
        "\n{} under-replicated partitions, {} without a leader, {} moving replicas, {} with followers behind",
        count(|p| p.leader.is_some() && p.isr.len() < p.replicas.len()),
        count(|p| p.leader.is_none()),
        count(|p| p.target.is_some()),
        s.degraded.iter().filter(|p| p.lag > 0).count(),
    );
    if !s.degraded.is_empty() {
        let _ = writeln!(
            out,
            "TOPIC\tPARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tMOVING-TO\tLAG"
        );
        let list = |nodes: &[i32]| {
            nodes
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        for p in &s.degraded {
            let st = &p.state;
            let _ = writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                p.topic,
                p.partition,
                st.leader.map_or("none".to_string(), |l| l.to_string()),
                st.leader_epoch,
                list(&st.replicas),
                list(&st.isr),
                st.target.as_deref().map_or("-".to_string(), list),
                p.lag,
            );
        }
    }
    out
}
