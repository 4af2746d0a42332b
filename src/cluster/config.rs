//! The cluster settings of one host, named after Kafka's KRaft settings: `node.id`,
//! `controller.quorum.voters`, `controller.listener` and `process.roles`.

use std::{net::SocketAddr, time::Duration};

use super::peer_tls::PeerTlsFiles;

/// The controller's default port (KRaft's usual controller listener).
pub const CONTROLLER_PORT: u16 = 9091;

/// One voter of the controller quorum: its host node id and controller address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Voter {
    /// The voter's host node id.
    pub id: u32,
    /// Where its controller listens.
    pub addr: SocketAddr,
}

/// Largest host node id: node ids `host × 1024 + shard` must fit Kafka's i32.
pub const HOST_ID_MAX: u32 = (i32::MAX as u32) / 1024 - 1;

/// Why a cluster setting was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClusterConfigError {
    /// A voter entry is not `ID@HOST:PORT`.
    #[error("{0:?} is not ID@HOST:PORT (a numeric id, a numeric host)")]
    Voter(String),
    /// Two voters share an id.
    #[error("voter {0} is listed twice")]
    DuplicateVoter(u32),
    /// A node id out of range.
    #[error("node id {0} is not within 0..={HOST_ID_MAX}")]
    NodeId(u64),
    /// `--process-roles` holds something other than broker and controller.
    #[error("{0:?} is not a list of broker and controller")]
    Roles(String),
    /// A voter must run the controller.
    #[error("node {0} is a voter but --process-roles lacks controller")]
    VoterNotController(u32),
    /// Neither role.
    #[error("--process-roles must name broker, controller or both")]
    NoRole,
}

/// Parses `1@10.0.0.1:9091,2@10.0.0.2:9091`: sorted by id, ids unique.
pub fn parse_voters(text: &str) -> Result<Vec<Voter>, ClusterConfigError> {
    let mut voters = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || ClusterConfigError::Voter(entry.to_string());
        let (id, addr) = entry.split_once('@').ok_or_else(bad)?;
        let id: u32 = id.parse().map_err(|_| bad())?;
        if id > HOST_ID_MAX {
            return Err(ClusterConfigError::NodeId(u64::from(id)));
        }
        let addr: SocketAddr = addr.parse().map_err(|_| bad())?;
        voters.push(Voter { id, addr });
    }
    voters.sort();
    if let Some(w) = voters.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(ClusterConfigError::DuplicateVoter(w[0].id));
    }
    Ok(voters)
}

/// What a process does (Kafka's `process.roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    /// Serves Kafka clients from its shards.
    pub broker: bool,
    /// Is a voter of the controller quorum.
    pub controller: bool,
}

/// Parses `broker,controller`, `broker` or `controller`.
pub fn parse_roles(text: &str) -> Result<Roles, ClusterConfigError> {
    let mut roles = Roles {
        broker: false,
        controller: false,
    };
    for role in text.split(',').map(str::trim) {
        match role {
            "broker" => roles.broker = true,
            "controller" => roles.controller = true,
            _ => return Err(ClusterConfigError::Roles(text.to_string())),
        }
    }
    if !roles.broker && !roles.controller {
        return Err(ClusterConfigError::NoRole);
    }
    Ok(roles)
}

/// How this host takes part in a cluster. Absent (`BrokerConfig::cluster` is `None`):
/// the host is a whole cluster of one, with its metadata in `topics.json` and no
/// controller machinery at all.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// The controller quorum, sorted by id.
    pub voters: Vec<Voter>,
    /// Where this host's controller listens (voters only).
    pub controller_listen: SocketAddr,
    /// What this process does.
    pub roles: Roles,
    /// A host that has not heartbeaten for this long is fenced (Kafka's
    /// `broker.session.timeout.ms`).
    pub session_timeout: Duration,
    /// Replicas of an auto-created topic or of a CreateTopics with -1 (Kafka's
    /// `default.replication.factor`).
    pub default_replication_factor: usize,
    /// A follower that has not caught up with its leader for this long leaves the ISR
    /// (Kafka's `replica.lag.time.max.ms`).
    pub replica_lag_time_max: Duration,
    /// The controller hands leadership back to preferred replicas by itself, after 10 s
    /// without hosts coming or going (Kafka's `auto.leader.rebalance.enable`).
    pub auto_leader_rebalance: bool,
    /// The controller channel's mutual TLS: every host's certificate, key and CA
    /// (`None`: plain TCP, for a private network only).
    pub tls: Option<PeerTlsFiles>,
}

impl ClusterConfig {
    /// Checks that the roles of host `node_id` agree with the voter list: a founding
    /// voter runs the controller. A controller that is not one of them joins the
    /// quorum later, when `weir cluster add-voter` names it.
    pub fn validate(&self, node_id: u32) -> Result<(), ClusterConfigError> {
        if node_id > HOST_ID_MAX {
            return Err(ClusterConfigError::NodeId(u64::from(node_id)));
        }
        let voter = self.voters.iter().any(|v| v.id == node_id);
        if voter && !self.roles.controller {
            return Err(ClusterConfigError::VoterNotController(node_id));
        }
        Ok(())
    }

    /// The voter list as it is written on the command line, for comparing two hosts'.
    pub fn voters_text(&self) -> String {
        voters_text(&self.voters)
    }
}

/// `1@HOST:PORT,2@HOST:PORT`, sorted by id.
pub fn voters_text(voters: &[Voter]) -> String {
    voters
        .iter()
        .map(|v| format!("{}@{}", v.id, v.addr))
        .collect::<Vec<_>>()
        .join(",")
}

/// How long a silent host keeps its partitions, by default. Kafka's
/// `broker.session.timeout.ms` is 9 s, sized for JVM pauses; weir has none, hosts
/// heartbeat every 500 ms, and a dead leader's partitions are unavailable this long —
/// 3 s keeps a failover within a few seconds while six missed heartbeats fence nobody
/// by accident.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a follower may stay behind before it leaves the ISR, by default: Kafka's
/// `replica.lag.time.max.ms` is 30 s; a third of it keeps acks=all stalls behind a slow
/// (not dead: the session timeout handles those) follower short.
pub const REPLICA_LAG_TIME_MAX: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voters_parse_sorted_and_refuse_nonsense() {
        let v = parse_voters("2@127.0.0.2:9091, 1@127.0.0.1:9091").expect("valid");
        assert_eq!(v.iter().map(|v| v.id).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(voters_text(&v), "1@127.0.0.1:9091,2@127.0.0.2:9091");
        for bad in ["1", "x@127.0.0.1:9091", "1@localhost", "1@127.0.0.1"] {
            assert!(
                matches!(parse_voters(bad), Err(ClusterConfigError::Voter(_))),
                "{bad}"
            );
        }
        assert_eq!(
            parse_voters("1@127.0.0.1:1,1@127.0.0.2:1"),
            Err(ClusterConfigError::DuplicateVoter(1))
        );
    }

    #[test]
    fn roles_must_agree_with_the_voter_list() {
        let roles = parse_roles("broker,controller").expect("valid");
        assert!(roles.broker && roles.controller);
        assert!(parse_roles("broker,zookeeper").is_err());
        let mut c = ClusterConfig {
            voters: parse_voters("1@127.0.0.1:9091").expect("valid"),
            controller_listen: "127.0.0.1:9091".parse().expect("addr"),
            roles,
            session_timeout: SESSION_TIMEOUT,
            default_replication_factor: 1,
            replica_lag_time_max: REPLICA_LAG_TIME_MAX,
            tls: None,
            auto_leader_rebalance: true,
        };
        assert_eq!(c.validate(3), Ok(()), "a controller waiting to be added");
        c.roles.controller = false;
        assert_eq!(c.validate(3), Ok(()));
        assert_eq!(
            c.validate(1),
            Err(ClusterConfigError::VoterNotController(1))
        );
    }
}
