//! Wall-clock time for segment age and retention, replaceable in tests.

use std::{cell::Cell, rc::Rc, time::SystemTime};

/// Where the storage engine reads the time from. Only segment rolling by age and
/// retention by age consult it; durability never depends on it.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// The system's real-time clock.
    #[default]
    System,
    /// A clock that moves only when a test sets it, in ms since the epoch.
    Manual(Rc<Cell<i64>>),
}

impl Clock {
    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::System => SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            Clock::Manual(ms) => ms.get(),
        }
    }
}
