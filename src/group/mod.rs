//! Consumer groups: each shard's [`coordinator`] runs the classic Kafka group protocol
//! over one [`state`] machine per group it coordinates, and keeps committed offsets in
//! the shared LMDB [`offset_store`], fenced by generation and made durable in batches by
//! the [`offset_syncer`]. On a cluster, every change goes through the replicated
//! [`journal`] first, kept small by its [`journal_snapshot`]s.

pub mod coordinator;
pub mod journal;
pub mod journal_snapshot;
pub mod offset_store;
pub mod offset_syncer;
pub mod state;
