//! Who a client is and what it may do, as data and checks with no I/O but the PEM files
//! read once at start: the rustls configurations of the Kafka listeners ([`tls`]; the
//! controller channel's peer TLS in `cluster/peer_tls.rs` builds on it), SCRAM
//! credentials as the metadata keeps them ([`credentials`]), Kafka's ACLs and the
//! authorizer's decision ([`acl`]), the server's side of a SCRAM
//! exchange ([`scram_server`]) and of a PLAIN login ([`plain`]), the principal of a client certificate ([`principal`]), and the metadata that
//! holds them ([`state`]); the broker's SASL settings ([`config`]). The Kafka APIs that use
//! them (SaslHandshake, SaslAuthenticate, the user SCRAM credential APIs) are in `api`;
//! the credentials travel with the rest of the cluster metadata, so every host checks
//! the same ones.

pub mod acl;
pub mod config;
pub mod credentials;
pub mod plain;
pub mod principal;
pub mod scram_server;
pub mod state;
pub mod tls;
