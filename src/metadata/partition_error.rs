//! Why a partition cannot be served by the shard asked: what the shard that holds (or
//! does not hold) a partition's log answers its callers, the Kafka handlers and the
//! follower fetcher alike (`api::error_code` says what Kafka error each is).

/// Why a partition cannot be served here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionError {
    /// No such topic or partition.
    Unknown,
    /// Another shard owns it; the client must refresh metadata.
    NotOwner,
    /// Its log could not be opened or is failing.
    Storage,
}
