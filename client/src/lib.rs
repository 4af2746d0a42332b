//! The Kafka wire as a client sees it, written once for everything in weir that talks to
//! a broker: the load generator, the `weir topics` / `weir groups` admin commands, the
//! integration tests, the benches, and the broker's own follower fetcher.
//!
//! - [`record_batch`]: RecordBatch v2 — its layout, building batches (CRC sealed),
//!   walking the batches of a fetch response; [`varint`] underneath.
//! - [`frame`]: one request as it goes on the wire, one response as it comes back
//!   (length prefix, header, correlation id checked, bounded length).
//! - [`connection`]: a pipelined connection on glommio, one task writing requests and
//!   another reading the answers in order, over plain TCP or TLS ([`dialer`]).
//! - [`blocking`]: a plain `std::net` connection for tests and the admin commands.
//! - [`metadata`]: finding a topic's partitions and leaders, and their offsets.
//! - [`sasl`], [`scram`]: logging in to a broker that requires SASL (PLAIN,
//!   SCRAM-SHA-256/512), on either connection.
//! - [`names`]: Kafka strings and topic names from plain ones.
//! - [`units`]: the one parser for durations and core lists that every command line uses.
//!
//! Message bodies are [`kafka_protocol`]'s types; this crate adds what that crate leaves
//! to its users: framing, connections, and the record-batch bytes.

#![warn(missing_docs)]

pub mod blocking;
pub mod connection;
pub mod dialer;
pub mod error;
pub mod frame;
pub mod metadata;
pub mod names;
pub mod record_batch;
pub mod sasl;
pub mod scram;
pub mod units;
pub mod varint;

pub use error::{ClientError, Result};
