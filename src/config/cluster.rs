//! The cluster section: node id, controller quorum, roles and the replication
//! timeouts (Kafka's KRaft settings). Without a voter list the host is a cluster of
//! one and the other cluster options are refused rather than ignored.

use std::{net::SocketAddr, time::Duration};

use super::{invalid, options::ServeOptions, BrokerConfig, ConfigError};
use crate::cluster::{
    config::{
        parse_roles, parse_voters, ClusterConfig, Roles, CONTROLLER_PORT, REPLICA_LAG_TIME_MAX,
        SESSION_TIMEOUT,
    },
    peer_tls::PeerTlsFiles,
};

/// Sets the node id and the cluster settings.
pub(super) fn apply(c: &mut BrokerConfig, o: &ServeOptions) -> Result<(), ConfigError> {
    if let Some(n) = o.node_id {
        c.node_id = n;
    }
    c.cluster = cluster_of(c.node_id, c.listen, o)?;
    Ok(())
}

/// The cluster settings of host `node_id` listening on `listen`: `None` without a voter
/// list.
fn cluster_of(
    node_id: u32,
    listen: SocketAddr,
    o: &ServeOptions,
) -> Result<Option<ClusterConfig>, ConfigError> {
    let Some(voters) = &o.controller_quorum_voters else {
        if o.controller_listen.is_some()
            || o.process_roles.is_some()
            || o.session_timeout.is_some()
            || o.replica_lag_time_max.is_some()
            || o.auto_leader_rebalance.is_some()
            || controller_tls(o)?.is_some()
        {
            return Err(invalid(
                "--controller-quorum-voters",
                "required with --controller-listen, --process-roles, --session-timeout, --replica-lag-time-max, --auto-leader-rebalance or --controller-tls-*",
            ));
        }
        if o.default_replication_factor.is_some_and(|f| f != 1) {
            return Err(invalid(
                "--default-replication-factor",
                "a single host holds one replica; more need --controller-quorum-voters",
            ));
        }
        return Ok(None);
    };
    let voters =
        parse_voters(voters).map_err(|e| invalid("--controller-quorum-voters", e.to_string()))?;
    if voters.is_empty() {
        return Err(invalid("--controller-quorum-voters", "lists no voter"));
    }
    let me = voters.iter().find(|v| v.id == node_id);
    let roles = match &o.process_roles {
        Some(r) => parse_roles(r).map_err(|e| invalid("--process-roles", e.to_string()))?,
        None => Roles {
            broker: true,
            controller: me.is_some(),
        },
    };
    // Where the other voters were told this one is; else the listen host.
    let controller_listen = o.controller_listen.unwrap_or_else(|| {
        me.map_or_else(|| SocketAddr::new(listen.ip(), CONTROLLER_PORT), |v| v.addr)
    });
    let session_timeout = o.session_timeout.map_or(SESSION_TIMEOUT, |s| s.0);
    if session_timeout < Duration::from_millis(500) {
        return Err(invalid("--session-timeout", "must be at least 500ms"));
    }
    let default_replication_factor = o.default_replication_factor.unwrap_or(1);
    if !(1..=16).contains(&default_replication_factor) {
        return Err(invalid(
            "--default-replication-factor",
            "must be within 1..=16",
        ));
    }
    let replica_lag_time_max = o.replica_lag_time_max.map_or(REPLICA_LAG_TIME_MAX, |s| s.0);
    if replica_lag_time_max < Duration::from_millis(100) {
        return Err(invalid("--replica-lag-time-max", "must be at least 100ms"));
    }
    let cluster = ClusterConfig {
        voters,
        controller_listen,
        roles,
        session_timeout,
        default_replication_factor: default_replication_factor as usize,
        replica_lag_time_max,
        tls: controller_tls(o)?,
        auto_leader_rebalance: o.auto_leader_rebalance.unwrap_or(true),
    };
    cluster
        .validate(node_id)
        .map_err(|e| invalid("--process-roles", e.to_string()))?;
    Ok(Some(cluster))
}

/// The controller channel's certificate, key and CA: all three or none.
fn controller_tls(o: &ServeOptions) -> Result<Option<PeerTlsFiles>, ConfigError> {
    match (
        &o.controller_tls_cert,
        &o.controller_tls_key,
        &o.controller_tls_ca,
    ) {
        (None, None, None) => Ok(None),
        (Some(cert), Some(key), Some(ca)) => Ok(Some(PeerTlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            ca: ca.clone(),
        })),
        _ => Err(invalid(
            "--controller-tls-cert",
            "the controller channel's TLS needs --controller-tls-cert, --controller-tls-key and --controller-tls-ca together",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::values::Span;

    #[test]
    fn the_cluster_defaults_from_the_voter_list() {
        let listen: SocketAddr = "10.0.0.9:9092".parse().expect("addr");
        let voters = || ServeOptions {
            controller_quorum_voters: Some("1@10.0.0.1:9091,2@10.0.0.2:9091".into()),
            ..ServeOptions::default()
        };
        let voter = cluster_of(2, listen, &voters())
            .expect("valid")
            .expect("cluster");
        assert!(voter.roles.controller && voter.roles.broker);
        assert_eq!(
            voter.controller_listen,
            "10.0.0.2:9091".parse().expect("addr")
        );
        assert_eq!(voter.session_timeout, Duration::from_secs(3));
        let broker = cluster_of(7, listen, &voters())
            .expect("valid")
            .expect("cluster");
        assert!(broker.roles.broker && !broker.roles.controller);
        assert_eq!(
            broker.controller_listen,
            "10.0.0.9:9091".parse().expect("addr")
        );
        assert!(matches!(
            cluster_of(7, listen, &ServeOptions::default()),
            Ok(None)
        ));
        let alone = ServeOptions {
            session_timeout: Some(Span(Duration::from_secs(3))),
            ..ServeOptions::default()
        };
        let refused = cluster_of(7, listen, &alone).expect_err("no voters");
        assert!(
            refused.to_string().contains("--controller-quorum-voters"),
            "{refused}"
        );
        let short = ServeOptions {
            session_timeout: Some(Span(Duration::from_millis(100))),
            ..voters()
        };
        assert!(cluster_of(7, listen, &short).is_err());
    }

    #[test]
    fn the_controller_channel_takes_a_certificate_key_and_ca_together() {
        let listen: SocketAddr = "10.0.0.9:9092".parse().expect("addr");
        let with = |cert: Option<&str>, key: Option<&str>, ca: Option<&str>| ServeOptions {
            controller_quorum_voters: Some("1@10.0.0.1:9091".into()),
            controller_tls_cert: cert.map(Into::into),
            controller_tls_key: key.map(Into::into),
            controller_tls_ca: ca.map(Into::into),
            ..ServeOptions::default()
        };
        let all = cluster_of(
            7,
            listen,
            &with(Some("c.pem"), Some("k.pem"), Some("ca.pem")),
        )
        .expect("valid")
        .expect("cluster");
        assert_eq!(
            all.tls,
            Some(PeerTlsFiles {
                cert: "c.pem".into(),
                key: "k.pem".into(),
                ca: "ca.pem".into()
            })
        );
        let half =
            cluster_of(7, listen, &with(Some("c.pem"), Some("k.pem"), None)).expect_err("no CA");
        assert!(half.to_string().contains("--controller-tls-ca"), "{half}");
        let alone = ServeOptions {
            controller_quorum_voters: None,
            ..with(Some("c.pem"), Some("k.pem"), Some("ca.pem"))
        };
        assert!(cluster_of(7, listen, &alone).is_err(), "TLS for no cluster");
    }
}
