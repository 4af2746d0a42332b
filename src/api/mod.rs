//! The Kafka APIs, one file each, all of one shape: a [`Handler`] says how its request
//! is decoded, what its answer may claim from the connection's byte budget, what must
//! happen in request order and what may run concurrently, and returns a typed response.
//! [`ROUTES`] is the one table of served APIs and versions: adding an API is a file with
//! a `Handler` and a line there. The connection (`net`) only calls [`decode`] and
//! [`Decoded::start`]; it never names an API.
//!
//! Handlers never fail a whole request for one partition: each partition gets its own
//! Kafka error code, from [`error_code`] for internal errors.

pub mod acl_wire;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod add_partitions_to_txn_brokers;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod authorize;
pub mod broker_configs;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod error_code;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod session;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

mod frame_codec;
mod handler;
mod routes;

pub use frame_codec::{Decoded, RequestError};
pub use handler::{BodyError, Call, Handler, Phase, Reply, SecurityProtocol};
pub use routes::{decode, Route, ROUTES};
pub use weir_client::names::{str_bytes, topic_name};
