//! The run's shared state across cores: when it started, when it ends, whether it was
//! aborted and why, and the totals consumers need to know when they have caught up.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Mutex,
    },
};

use crate::clock::now_ns;

/// Shared by every task of the run (behind an `Arc`); touched per batch, never per record.
pub struct Control {
    /// When the run started (process clock); rate schedules count from here.
    pub start_ns: u64,
    /// When producing stops, if the run is timed.
    pub end_ns: Option<u64>,
    stopped: AtomicBool,
    abort_reason: Mutex<Option<String>>,
    error_kinds: Mutex<BTreeMap<String, u64>>,
    acknowledged: AtomicU64,
    consumed: AtomicU64,
    producers_running: AtomicUsize,
    producers_done_ns: AtomicU64,
}

impl Control {
    /// A run starting at `start_ns` with `producers` producer streams.
    pub fn new(start_ns: u64, end_ns: Option<u64>, producers: usize) -> Control {
        Control {
            start_ns,
            end_ns,
            stopped: AtomicBool::new(false),
            abort_reason: Mutex::new(None),
            error_kinds: Mutex::new(BTreeMap::new()),
            acknowledged: AtomicU64::new(0),
            consumed: AtomicU64::new(0),
            producers_running: AtomicUsize::new(producers),
            producers_done_ns: AtomicU64::new(0),
        }
    }

    /// Whether producers must stop generating: the time is up or the run was aborted.
    pub fn stopping(&self, now_ns: u64) -> bool {
        self.stopped.load(Ordering::Relaxed) || self.end_ns.is_some_and(|end| now_ns >= end)
    }

    /// Whether the run was aborted.
    pub fn aborted(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Ends the run early; the first reason given is the one reported.
    pub fn abort(&self, reason: String) {
        let mut slot = self.abort_reason.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(reason);
        }
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Why the run was aborted, if it was.
    pub fn abort_reason(&self) -> Option<String> {
        self.abort_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Counts `count` failed messages or requests of kind `kind` (e.g. a Kafka error name).
    pub fn note_error(&self, kind: &str, count: u64) {
        let mut kinds = self.error_kinds.lock().unwrap_or_else(|p| p.into_inner());
        *kinds.entry(kind.to_string()).or_default() += count;
    }

    /// Failures by kind.
    pub fn error_kinds(&self) -> BTreeMap<String, u64> {
        self.error_kinds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Counts acknowledged messages.
    pub fn add_acknowledged(&self, messages: u64) {
        self.acknowledged.fetch_add(messages, Ordering::Relaxed);
    }

    /// Counts consumed messages; returns the new total.
    pub fn add_consumed(&self, messages: u64) -> u64 {
        self.consumed.fetch_add(messages, Ordering::Relaxed) + messages
    }

    /// Messages acknowledged so far, over all producers.
    pub fn acknowledged(&self) -> u64 {
        self.acknowledged.load(Ordering::Relaxed)
    }

    /// Messages consumed so far, over all consumers.
    pub fn consumed(&self) -> u64 {
        self.consumed.load(Ordering::Relaxed)
    }

    /// A producer stream finished (all its requests answered or given up on).
    pub fn producer_done(&self) {
        if self.producers_running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.producers_done_ns.store(now_ns(), Ordering::Release);
        }
    }

    /// When the last producer finished, if all have.
    pub fn producers_done_at(&self) -> Option<u64> {
        (self.producers_running.load(Ordering::Acquire) == 0)
            .then(|| self.producers_done_ns.load(Ordering::Acquire))
    }
}
