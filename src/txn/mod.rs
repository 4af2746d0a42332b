//! Transactions (Kafka's exactly-once): each shard's transaction coordinator
//! ([`coordinator`]) keeps the state of the transactional ids that hash to it
//! ([`state`], pure), persists every change before answering ([`state_manager`]), and
//! ends a transaction by writing COMMIT or ABORT markers to each of its partitions
//! through their leaders. The partition side — open
//! transactions, aborted ranges, the last stable offset — is
//! `storage::partition_txns`.

pub mod coordinator;
pub mod enrol;
pub mod markers;
pub mod peer;
pub mod state;
pub mod state_log;
pub mod state_manager;
pub mod state_writer;
pub mod stored;
