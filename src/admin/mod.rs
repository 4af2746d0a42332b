//! `weir topics …`, `weir groups …`, `weir transactions …`, `weir users …` and
//! `weir acls …`: operator commands that speak the Kafka protocol to a running broker,
//! as Kafka's own tools do. Blocking, one request at a time, over
//! `weir_client::blocking`. `weir cluster status` asks the controller quorum
//! ([`cluster_status`]).

pub mod acls;
pub mod cluster_status;
pub mod commands;
pub mod groups;
pub mod transactions;
pub mod users;
