//! `weir cluster status`: asks a controller (any voter; it follows the leader) for the
//! quorum and the hosts, and prints them as a table or as JSON.

use std::{fmt::Write, time::Duration};

use crate::{
    cluster::rpc::{self, ClusterStatus, Request, Response},
    metadata::cluster_state::MetadataError,
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

/// The status, asked of `controller` and, if it is not the leader, of the leader it
/// names.
pub fn fetch(controller: &str) -> Result<ClusterStatus, StatusError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| StatusError::Io {
            addr: controller.to_string(),
            source,
        })?;
    runtime.block_on(async {
        let mut addr = controller.to_string();
        for _ in 0..5 {
            let mut client = rpc::Client::new(addr.clone());
            let response = client
                .call(&Request::Status, Duration::from_secs(5))
                .await
                .map_err(|source| StatusError::Io {
                    addr: addr.clone(),
                    source,
                })?;
            match response {
                Response::Status(Ok(s)) => return Ok(s),
                Response::Status(Err(MetadataError::NotLeader {
                    leader: Some(leader),
                })) => addr = leader,
                Response::Status(Err(e)) => return Err(e.into()),
                other => {
                    return Err(StatusError::Io {
                        addr,
                        source: rpc::unexpected(&other),
                    })
                }
            }
        }
        Err(MetadataError::NotLeader { leader: None }.into())
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
            if r.fenced { "fenced" } else { "alive" },
            h.heartbeat_age_ms.map_or("never".to_string(), |ms| format!(
                "{:.1}s ago",
                ms as f64 / 1000.0
            )),
            h.partitions,
            if h.voter { "yes" } else { "no" },
        );
    }
    out
}
