//! What a partition log shares with the other logs of its shard, handed to it when it
//! is opened: the group commit that makes it durable, the batch cache its tail is read
//! from, the clock, and its id (the cache's key). A log knows these, not the whole
//! [`super::ShardStorage`] that owns them.

use std::rc::Rc;

use crate::metrics::StorageMetrics;

use super::{
    batch_cache::BatchCache, clock::Clock, flush::FlushScheduler, segment_appender::ZeroFillSlot,
    segment_pool::SegmentPool,
};

/// A partition log's share of its shard's storage. Cloning shares it; `!Send`.
#[derive(Clone)]
pub struct LogEnv {
    /// The log's id on its shard, unique while the shard runs.
    pub id: u64,
    /// The shard's group commit.
    pub flusher: FlushScheduler,
    /// The shard's batch cache.
    pub cache: Rc<BatchCache>,
    /// The shard's clock.
    pub clock: Clock,
    /// The shard's zero-fill slot, shared by its segments' appenders.
    pub zero_fill: ZeroFillSlot,
    /// The shard's pool of recycled segment files: new segments take from it, deleted
    /// ones give to it.
    pub pool: SegmentPool,
    /// The shard's storage metrics (recovery, retention, fencing).
    pub metrics: StorageMetrics,
}
