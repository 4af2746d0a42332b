//! Consumer groups: each shard's [`coordinator`] runs the classic Kafka group protocol
//! over one [`state`] machine per group it coordinates, and keeps committed offsets in
//! the shared LMDB [`offset_store`], fenced by generation and made durable in batches by
//! the [`offset_syncer`].

pub mod coordinator;
pub mod journal;
pub mod offset_store;
pub mod offset_syncer;
pub mod state;
