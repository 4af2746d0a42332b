//! The campaign's history: one JSON line per fault (what, on which host, which
//! partitions it hit, when it began and healed), written as the campaign goes so a
//! failed run can be read and replayed (the seed is its first line).

use std::{io::Write, path::Path};

use serde_json::json;

/// Milliseconds since the Unix epoch: the clock Kafka's verifiable clients stamp their
/// events with.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One fault as it was injected.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its name (`Fault::name`).
    pub fault: &'static str,
    /// The host it hit, if one.
    pub host: Option<u32>,
    /// The checked topic's partitions that host led when it was hit.
    pub partitions: Vec<i32>,
    /// When it began.
    pub start_ms: u64,
    /// When it was healed (the host back, the link up, the space freed).
    pub heal_ms: u64,
    /// Anything the nemesis saw on the way (a host that exited, a skipped fault).
    pub note: String,
}

/// The history file.
pub struct History(std::fs::File);

impl History {
    /// Creates it at `path`, its first line the seed.
    pub fn create(path: &Path, seed: u64) -> History {
        let mut file = std::fs::File::create(path).expect("history file");
        writeln!(file, "{}", json!({ "seed": seed, "start_ms": unix_ms() })).expect("history");
        History(file)
    }

    /// Appends `event`.
    pub fn record(&mut self, event: &Event) {
        let line = json!({
            "fault": event.fault,
            "host": event.host,
            "partitions": event.partitions,
            "start_ms": event.start_ms,
            "heal_ms": event.heal_ms,
            "note": event.note,
        });
        writeln!(self.0, "{line}").expect("history");
    }
}
