//! Transaction metrics, per coordinator shard: transactions begun, committed, aborted
//! and expired, and the open ones with the age of the oldest (published by the shard's
//! transaction housekeeping, every 500 ms).

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use super::{storage_metrics::SecondsGauge, ShardLabel};

/// The transaction families, registered once.
#[derive(Clone)]
pub(super) struct TransactionFamilies {
    begun: Family<ShardLabel, Counter>,
    committed: Family<ShardLabel, Counter>,
    aborted: Family<ShardLabel, Counter>,
    expired: Family<ShardLabel, Counter>,
    open: Family<ShardLabel, Gauge>,
    oldest: Family<ShardLabel, SecondsGauge>,
}

impl TransactionFamilies {
    /// Creates the families and registers them in `registry`.
    pub(super) fn register(registry: &mut Registry) -> TransactionFamilies {
        let t = TransactionFamilies {
            begun: Family::default(),
            committed: Family::default(),
            aborted: Family::default(),
            expired: Family::default(),
            open: Family::default(),
            oldest: Family::default(),
        };
        registry.register(
            "transactions_begun",
            "Transactions opened (a first AddPartitionsToTxn or AddOffsetsToTxn), by coordinator shard",
            t.begun.clone(),
        );
        registry.register(
            "transactions_committed",
            "Transactions whose COMMIT markers were all written, by coordinator shard",
            t.committed.clone(),
        );
        registry.register(
            "transactions_aborted",
            "Transactions whose ABORT markers were all written (asked, fenced or expired), by coordinator shard",
            t.aborted.clone(),
        );
        registry.register(
            "transactions_expired",
            "Transactions aborted because they stayed open past their timeout, by coordinator shard",
            t.expired.clone(),
        );
        registry.register(
            "transactions_open",
            "Transactions open on a coordinator shard",
            t.open.clone(),
        );
        registry.register(
            "transaction_oldest_open_seconds",
            "Age of the oldest open transaction on a coordinator shard",
            t.oldest.clone(),
        );
        t
    }

    /// Shard `shard`'s handles.
    pub(super) fn for_shard(&self, shard: u32) -> TransactionMetrics {
        let labels = ShardLabel { shard };
        TransactionMetrics {
            begun: self.begun.get_or_create(&labels).clone(),
            committed: self.committed.get_or_create(&labels).clone(),
            aborted: self.aborted.get_or_create(&labels).clone(),
            expired: self.expired.get_or_create(&labels).clone(),
            open: self.open.get_or_create(&labels).clone(),
            oldest: self.oldest.get_or_create(&labels).clone(),
        }
    }
}

/// One shard's transaction counters (a clone counts into the same series).
#[derive(Clone)]
pub struct TransactionMetrics {
    begun: Counter,
    committed: Counter,
    aborted: Counter,
    expired: Counter,
    open: Gauge,
    oldest: SecondsGauge,
}

impl TransactionMetrics {
    /// A transaction was opened.
    pub fn begun(&self) {
        self.begun.inc();
    }

    /// A transaction's COMMIT markers were all written.
    pub fn committed(&self) {
        self.committed.inc();
    }

    /// A transaction's ABORT markers were all written.
    pub fn aborted(&self) {
        self.aborted.inc();
    }

    /// A transaction timed out and is being aborted.
    pub fn expired(&self) {
        self.expired.inc();
    }

    /// `open` transactions are open, the oldest for `oldest_ms` milliseconds.
    pub fn set_open(&self, open: u64, oldest_ms: u64) {
        self.open.set(open as i64);
        self.oldest.set(oldest_ms as f64 / 1000.0);
    }
}
