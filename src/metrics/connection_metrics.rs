//! Connection metrics: connections accepted, open and closed (by reason), and the
//! request bytes a shard holds unanswered.

use std::{
    cell::{Cell, RefCell},
    collections::HashMap,
    time::{Duration, Instant},
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::{Registry, Unit},
};

use super::ShardLabel;

/// A shard and why it closed a connection.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// The shard index.
    pub shard: u32,
    /// Why (`frame`, `request`, `idle`, `stalled`, `socket`).
    pub reason: String,
}

/// The connection families, registered once.
pub(super) struct ConnectionFamilies {
    accepted: Family<ShardLabel, Counter>,
    closed: Family<ReasonLabels, Counter>,
    open: Family<ShardLabel, Gauge>,
    inflight_bytes: Family<ShardLabel, Gauge>,
}

impl ConnectionFamilies {
    /// Creates the families and registers them in `registry`.
    pub(super) fn register(registry: &mut Registry) -> ConnectionFamilies {
        let f = ConnectionFamilies {
            accepted: Family::default(),
            closed: Family::default(),
            open: Family::default(),
            inflight_bytes: Family::default(),
        };
        registry.register(
            "connections_accepted",
            "Client connections accepted",
            f.accepted.clone(),
        );
        registry.register(
            "connections_closed",
            "Client connections closed, by reason (client: the client closed it)",
            f.closed.clone(),
        );
        registry.register(
            "connections_open",
            "Client connections open",
            f.open.clone(),
        );
        registry.register_with_unit(
            "inflight_request",
            "Bytes of unanswered requests the shard holds (bounded by --inflight-bytes)",
            Unit::Bytes,
            f.inflight_bytes.clone(),
        );
        f
    }

    /// Shard `shard`'s handles.
    pub(super) fn for_shard(&self, shard: u32) -> ConnectionMetrics {
        let label = ShardLabel { shard };
        ConnectionMetrics {
            shard,
            accepted: self.accepted.get_or_create_owned(&label),
            open: self.open.get_or_create_owned(&label),
            inflight_bytes: self.inflight_bytes.get_or_create_owned(&label),
            closed_family: self.closed.clone(),
            closed: RefCell::default(),
            last_protocol_log: Cell::new(None),
        }
    }
}

/// One shard's connection metrics. `!Send`.
pub struct ConnectionMetrics {
    shard: u32,
    /// Connections accepted.
    pub accepted: Counter,
    /// Connections open.
    pub open: Gauge,
    /// Unanswered request bytes held.
    pub inflight_bytes: Gauge,
    closed_family: Family<ReasonLabels, Counter>,
    /// Closed connections by reason, looked up once per reason.
    closed: RefCell<HashMap<&'static str, Counter>>,
    /// When a connection closed for a protocol reason was last logged at info.
    last_protocol_log: Cell<Option<Instant>>,
}

impl ConnectionMetrics {
    /// Counts a connection closed for `reason`.
    pub fn closed(&self, reason: &'static str) {
        self.closed
            .borrow_mut()
            .entry(reason)
            .or_insert_with(|| {
                self.closed_family.get_or_create_owned(&ReasonLabels {
                    shard: self.shard,
                    reason: reason.to_string(),
                })
            })
            .inc();
    }

    /// True at most once a second: whether to log a connection closed for a protocol
    /// reason at info (every one is counted in `weir_connections_closed`).
    pub fn protocol_log_due(&self) -> bool {
        let now = Instant::now();
        let due = self
            .last_protocol_log
            .get()
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1));
        if due {
            self.last_protocol_log.set(Some(now));
        }
        due
    }
}
