//! weir: a Kafka-wire-compatible message broker for dedicated Linux hosts.
//!
//! # The house
//!
//! One pinned thread per core — a *shard*, a glommio executor ([`shard`]) — each owning
//! a disjoint set of partitions and consumer groups, chosen by a pure function
//! ([`metadata::placement`]). Every shard listens on its own port and appears in Kafka
//! `Metadata` as its own node, so clients connect straight to the core that owns what
//! they want and no request crosses cores. Partitions are O_DIRECT segment files made
//! durable by one group commit per shard ([`storage`]); committed group offsets live in
//! LMDB ([`group`]). The Kafka wire as a *client* sees it — batches, framing,
//! connections — is the `weir_client` crate (`client/`), shared with loadgen, the admin
//! commands ([`admin`]) and the tests.
//!
//! Layers know only their neighbours: [`net`] reads frames, enforces byte budgets and
//! answers in request order, and never names a Kafka API; [`api`] holds one handler per
//! API and the one table of them ([`api::ROUTES`]); handlers reach partitions and groups
//! through the shard's [`shard::context::ShardContext`]; [`api::error_code`] is the one
//! place internal errors become Kafka error codes. Who a client is — its SASL login,
//! checked against the SCRAM credentials of [`security`] — is the connection's
//! [`api::session::Session`], which [`api::decode`] consults before any handler runs.
//!
//! # Where a produce request goes
//!
//! 1. `net/listener.rs` accepts the connection on the shard's port; `net/connection.rs`
//!    reads bytes and `net/frame.rs` cuts a length-prefixed frame (bounded before
//!    anything is allocated).
//! 2. `api/routes.rs` ([`api::decode`]) decodes the header, finds Produce in
//!    [`api::ROUTES`] and has `api/produce.rs` decode the body; the connection claims
//!    the frame's bytes from the shard's and the connection's budgets.
//! 3. Produce's in-order phase (`api/produce.rs`, before the next request is read):
//!    `shard/context.rs` finds the partition's log, `storage/record_batch.rs` validates
//!    each batch (header, lengths, CRC-32C) without decoding records, and
//!    `storage/partition_log/mod.rs` assigns offsets and hands the batch to the active
//!    `storage/segment.rs`, whose `storage/segment_appender.rs` copies it into an aligned
//!    chunk; the log queues itself for the shard's group commit.
//! 4. `storage/flush.rs`, the shard's flush loop, runs a round (when its interval, fixed
//!    or chosen by `storage/flush_control.rs`, has passed): every queued log's
//!    chunks are written with O_DIRECT (`storage/partition_log/flush_target.rs`), one
//!    fdatasync covers the round, the high watermarks move, and the appends'
//!    `storage/partition_log/durable.rs` futures resolve.
//! 5. Produce's concurrent phase awaits those futures and returns a typed response;
//!    `api/frame_codec.rs` encodes it, and the connection's writer sends it after every earlier
//!    response of the connection.
//!
//! # Where a fetch goes
//!
//! Steps 1–2 as above, except that `api/fetch.rs` declares the most bytes its answer may
//! carry and the connection claims those too before starting it. The fetch then runs
//! concurrently: `storage/partition_log/mod.rs` reads whole batches up to the high
//! watermark — from the shard's `storage/batch_cache.rs` for the tail, by aligned DMA
//! reads through `storage/segment_reader.rs` otherwise — and, while fewer than
//! `min_bytes` are available, waits for the next group commit
//! ([`storage::ShardStorage::durable_after`]) until `max_wait_ms` passes.
//!
//! # Where an offset commit goes
//!
//! Steps 1–2 as above; `api/offset_commit.rs` checks that this shard coordinates the
//! group and asks `group/coordinator/offsets.rs`, which fences the commit against the group's
//! `group/state.rs` (member, generation, rebalance), writes it to LMDB on the blocking
//! pool (`group/offset_store.rs`, the fencing rule of `docs/design.md`'s SQL), and waits for
//! `group/offset_syncer.rs` to fsync the store — one fsync for every commit written
//! before it started — before the response goes out.

#![warn(missing_docs)]

pub mod admin;
pub mod api;
pub mod broker;
pub mod cluster;
pub mod config;
pub mod failure_probe;
pub mod group;
pub mod ids;
pub mod keyed_lock;
pub mod metadata;
pub mod metrics;
pub mod net;
pub mod replication;
pub mod reserve_alloc;
pub mod security;
pub mod semaphore;
pub mod shard;
pub mod storage;
pub mod txn;
