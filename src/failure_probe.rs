//! Failure probes: named points where a crash test asks the broker to die as `kill -9`
//! would, so that a crash lands between two steps no outside timing can separate (a
//! transaction decided but not yet marked, say). Redpanda keeps its failure probes in
//! release builds for the same reason: the binary under test is the one users run.
//!
//! A probe is armed by the environment, `WEIR_FAILURE_PROBE=<name>` (empty: none), read once; the
//! process sends itself SIGKILL the first time it reaches the named point, so nothing
//! after it — no destructor, no flush, no answer — runs. Unarmed, reaching a point costs
//! one load of a `OnceLock`.

use std::sync::OnceLock;

/// The environment variable that arms a probe.
pub const FAILURE_PROBE_ENV: &str = "WEIR_FAILURE_PROBE";

/// A point a crash test can stop the broker at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// A transaction coordinator has made an EndTxn's decision (PrepareCommit or
    /// PrepareAbort) durable and has not yet sent any marker.
    TxnPrepared,
    /// A partition leader has made a transaction's markers durable and has not yet
    /// told the coordinator.
    TxnMarkerWritten,
    /// A transaction coordinator has every marker of a transaction written and has not
    /// yet recorded the transaction as complete.
    TxnMarked,
}

impl Probe {
    /// Every probe, by name.
    pub const ALL: [(Probe, &'static str); 3] = [
        (Probe::TxnPrepared, "txn-prepared"),
        (Probe::TxnMarkerWritten, "txn-marker-written"),
        (Probe::TxnMarked, "txn-marked"),
    ];

    /// The probe called `name`.
    pub fn named(name: &str) -> Option<Probe> {
        Probe::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(probe, _)| *probe)
    }
}

/// The probe the environment armed, if any; an unknown name is reported once and arms
/// nothing.
fn armed() -> Option<Probe> {
    static ARMED: OnceLock<Option<Probe>> = OnceLock::new();
    *ARMED.get_or_init(|| {
        let name = std::env::var(FAILURE_PROBE_ENV)
            .ok()
            .filter(|n| !n.is_empty())?;
        let probe = Probe::named(&name);
        match probe {
            Some(_) => tracing::warn!(
                probe = name,
                "failure probe armed: this process will kill itself there"
            ),
            None => tracing::error!(probe = name, "no such failure probe; none is armed"),
        }
        probe
    })
}

/// Marks that the broker reached `probe`: kills the process with SIGKILL when it is the
/// armed one.
pub fn reached(probe: Probe) {
    if armed() == Some(probe) {
        tracing::warn!(?probe, "failure probe reached: killing this process");
        // SAFETY: getpid and kill have no preconditions; SIGKILL ends the process here.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_is_found_by_its_name_and_only_by_it() {
        for (probe, name) in Probe::ALL {
            assert_eq!(Probe::named(name), Some(probe));
        }
        assert_eq!(Probe::named("txn"), None);
        assert_eq!(Probe::named(""), None);
    }
}
