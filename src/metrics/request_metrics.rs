//! Request metrics: Kafka requests and their latency by API, and the Kafka errors their
//! responses carry. A shard's [`RequestMetrics`] looks each API's handles up once.

use std::{cell::RefCell, collections::HashMap, time::Duration};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::{Registry, Unit},
};

/// A shard and a Kafka API.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    /// The shard index.
    pub shard: u32,
    /// The API's name, as Kafka spells it (`Produce`, `Fetch`, …).
    pub api: String,
}

/// A shard, an API and the Kafka error a partition got.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// The shard index.
    pub shard: u32,
    /// The API's name.
    pub api: String,
    /// Kafka's name for the error (`NotLeaderOrFollower`, …).
    pub error: String,
}

type Histograms = Family<ApiLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 50 µs to ~13 s: the fastest local request to the longest long poll.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        50e-6, 2.0, 19,
    ))
}

/// The request families, registered once.
#[derive(Clone)]
pub(super) struct RequestFamilies {
    requests: Family<ApiLabels, Counter>,
    latency: Histograms,
    errors: Family<ErrorLabels, Counter>,
}

impl RequestFamilies {
    /// Creates the families and registers them in `registry`.
    pub(super) fn register(registry: &mut Registry) -> RequestFamilies {
        let f = RequestFamilies {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            errors: Family::default(),
        };
        registry.register(
            "kafka_requests",
            "Kafka requests decoded, by API",
            f.requests.clone(),
        );
        registry.register_with_unit(
            "kafka_request_latency",
            "Time from a request's decoding to its response being ready, by API (Produce: to the durable acknowledgement; Fetch: including the long poll)",
            Unit::Seconds,
            f.latency.clone(),
        );
        registry.register(
            "kafka_errors",
            "Kafka errors in responses, by API and error: a response's own, or one per topic, partition, group or member it answers for",
            f.errors.clone(),
        );
        f
    }

    /// Shard `shard`'s handles.
    pub(super) fn for_shard(&self, shard: u32) -> RequestMetrics {
        RequestMetrics {
            shard,
            families: self.clone(),
            apis: RefCell::default(),
            errors: RefCell::default(),
        }
    }
}

/// One shard's request metrics. `!Send` (its caches are shard-local).
pub struct RequestMetrics {
    shard: u32,
    families: RequestFamilies,
    /// Requests and latency by API, looked up once per API.
    apis: RefCell<HashMap<&'static str, (Counter, Histogram)>>,
    /// Errors by API and code, looked up once per pair.
    errors: RefCell<HashMap<(&'static str, i16), Counter>>,
}

impl RequestMetrics {
    /// Counts a request of `api` that took `latency` from decoding to its response.
    pub fn request(&self, api: &'static str, latency: Duration) {
        let mut apis = self.apis.borrow_mut();
        let (count, histogram) = apis.entry(api).or_insert_with(|| {
            let labels = ApiLabels {
                shard: self.shard,
                api: api.to_string(),
            };
            (
                self.families.requests.get_or_create_owned(&labels),
                self.families.latency.get_or_create_owned(&labels),
            )
        });
        count.inc();
        histogram.observe(latency.as_secs_f64());
    }

    /// Counts Kafka error `code` (0 is skipped) in a response of `api`.
    pub fn error(&self, api: &'static str, code: i16) {
        if code == 0 {
            return;
        }
        let mut errors = self.errors.borrow_mut();
        let counter = match errors.entry((api, code)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                // A code Kafka does not define is not counted (no label to give it).
                let Some(error) = kafka_protocol::ResponseError::try_from_code(code) else {
                    return;
                };
                e.insert(self.families.errors.get_or_create_owned(&ErrorLabels {
                    shard: self.shard,
                    api: api.to_string(),
                    error: format!("{error:?}"),
                }))
            }
        };
        counter.inc();
    }
}
