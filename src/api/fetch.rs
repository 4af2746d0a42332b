//! Fetch: returns stored batches unchanged from each requested partition, up to the
//! high watermark, honouring `max_bytes`, `partition_max_bytes` and long polling
//! (`min_bytes`, `max_wait_ms`: the request waits for group commits until enough bytes
//! are readable or the wait is over). Fetch sessions are declined (session id 0), which
//! Kafka allows: clients then send full fetches.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        fetch_response::{FetchableTopicResponse, PartitionData},
        FetchRequest, FetchResponse,
    },
    ResponseError,
};

use crate::{
    shard::context::ShardContext,
    storage::{Offset, StorageError},
};

use super::{decode_body, encode, Request};

/// The longest a fetch may wait, whatever the client asks.
const WAIT_MAX: Duration = Duration::from_secs(30);

/// The most record bytes one fetch response carries, whatever the client asks (beyond
/// one whole batch, so a consumer always makes progress): Kafka's broker default
/// `fetch.max.bytes`, 55 MiB.
pub const RESPONSE_RECORD_BYTES_MAX: usize = 55 << 20;

async fn read_all(
    ctx: &ShardContext,
    req: &FetchRequest,
    version: i16,
) -> (Vec<FetchableTopicResponse>, usize, bool) {
    // Fields a version does not have must keep their defaults, or encoding fails.
    let with_log_start = version >= 5;
    let mut budget = (req.max_bytes.max(0) as usize).min(RESPONSE_RECORD_BYTES_MAX);
    let mut total = 0usize;
    let mut errors = false;
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in &req.topics {
        let mut t = FetchableTopicResponse::default();
        t.topic = topic.topic.clone();
        t.topic_id = topic.topic_id;
        for partition in &topic.partitions {
            let mut d = PartitionData::default();
            d.partition_index = partition.partition;
            d.high_watermark = -1;
            d.last_stable_offset = -1;
            d.log_start_offset = -1;
            d.aborted_transactions = Some(Vec::new());
            match ctx
                .partition(topic.topic.0.as_str(), partition.partition)
                .await
            {
                Err(e) => {
                    d.error_code = e.code();
                    errors = true;
                }
                Ok(log) => {
                    let max = (partition.partition_max_bytes.max(0) as usize).min(budget);
                    let offset = Offset(partition.fetch_offset.max(0) as u64);
                    let result = if partition.fetch_offset < 0 {
                        Err(StorageError::OffsetOutOfRange {
                            requested: offset,
                            log_start: log.log_start_offset(),
                            high_watermark: log.high_watermark(),
                        })
                    } else if max == 0 && total > 0 {
                        // Out of response budget: report offsets only.
                        log.read(offset, 0).await.map(|mut r| {
                            r.records = Bytes::new();
                            r
                        })
                    } else {
                        log.read(offset, max.max(1)).await
                    };
                    match result {
                        Ok(read) => {
                            d.high_watermark = read.high_watermark.to_wire();
                            d.last_stable_offset = read.high_watermark.to_wire();
                            if with_log_start {
                                d.log_start_offset = read.log_start_offset.to_wire();
                            }
                            total += read.records.len();
                            budget = budget.saturating_sub(read.records.len());
                            d.records = Some(read.records);
                        }
                        Err(StorageError::OffsetOutOfRange {
                            log_start,
                            high_watermark,
                            ..
                        }) => {
                            d.error_code = ResponseError::OffsetOutOfRange.code();
                            d.high_watermark = high_watermark.to_wire();
                            d.last_stable_offset = high_watermark.to_wire();
                            if with_log_start {
                                d.log_start_offset = log_start.to_wire();
                            }
                            errors = true;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "fetch read failed");
                            d.error_code = ResponseError::KafkaStorageError.code();
                            errors = true;
                        }
                    }
                }
            }
            t.partitions.push(d);
        }
        topics.push(t);
    }
    (topics, total, errors)
}

/// A decoded fetch request, ready to be answered.
pub struct Fetch {
    req: FetchRequest,
}

impl Fetch {
    /// Decodes `request`'s body; `None` (logged) when it cannot be decoded.
    pub fn decode(request: &Request) -> Option<Fetch> {
        decode_body(request).map(|req| Fetch { req })
    }

    /// The most record bytes the answer can carry, not counting the one batch a
    /// partition may return beyond its limit: the least of the request's `max_bytes`, the
    /// sum of its partitions' `partition_max_bytes`, and [`RESPONSE_RECORD_BYTES_MAX`].
    pub fn record_bytes_max(&self) -> usize {
        let partitions: usize = self
            .req
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.partition_max_bytes.max(0) as usize)
            .fold(0, usize::saturating_add);
        (self.req.max_bytes.max(0) as usize)
            .min(partitions)
            .min(RESPONSE_RECORD_BYTES_MAX)
    }

    /// Reads every partition; waits for more data while fewer than `min_bytes` are
    /// available, no partition failed and `max_wait_ms` has not passed. `None` when
    /// the response cannot be encoded.
    pub async fn answer(self, ctx: &ShardContext, request: &Request) -> Option<Bytes> {
        let req = self.req;
        let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(WAIT_MAX);
        let deadline = Instant::now() + wait;
        let min_bytes = req.min_bytes.max(0) as usize;
        loop {
            let round = ctx.storage.flusher().rounds();
            let (topics, total, errors) = read_all(ctx, &req, request.version()).await;
            let now = Instant::now();
            if total >= min_bytes.max(1) || errors || now >= deadline {
                let mut response = FetchResponse::default();
                response.responses = topics;
                response.session_id = 0;
                return encode(request, request.version(), &response);
            }
            futures_lite::future::or(
                ctx.storage.flusher().round_after(round),
                glommio::timer::sleep(deadline - now),
            )
            .await;
        }
    }
}
