//! weir: a Kafka-wire-compatible message broker for dedicated Linux hosts.
//!
//! One pinned thread per core, each owning a disjoint set of partitions; io_uring for
//! every I/O through glommio; partitions stored in O_DIRECT segment files and made
//! durable by a per-shard group commit. This crate holds the storage engine
//! ([`storage`]); the broker, consumer groups and the load generator build on it.

#![warn(missing_docs)]

pub mod admin;
pub mod api;
pub mod config;
pub mod group;
pub mod metadata;
pub mod net;
pub mod reserve_alloc;
pub mod shard;
pub mod storage;
