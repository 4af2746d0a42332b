//! Hosts' sessions on the controller leader: the time of each host's last heartbeat,
//! kept in memory only, and the leader's loop that fences a host silent for longer than
//! the session timeout (committing only the change of state, as KRaft does) and moves
//! leadership back to preferred replicas once hosts stop coming and going.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use super::{Controller, ELECTION_TIMEOUT_MAX_MS, FENCE_CHECK, PREFERRED_LEADER_QUIET};
use crate::metadata::cluster_state::Command;

impl Controller {
    pub(super) fn heard_within(&self, host: u32, within: Duration) -> bool {
        self.heartbeats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&host)
            .is_some_and(|t| t.elapsed() < within)
    }

    pub(super) fn membership_changed(&self) {
        *self
            .membership_changed
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    pub(super) fn heard(&self, host: u32) {
        self.heartbeats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(host, Instant::now());
    }

    /// A new leader has heard from nobody yet: every host gets a full session from now —
    /// except the host of the leader it replaces, which a voter other than this one had
    /// not heard from for the leader lease (the maximum election timeout) when it granted
    /// its vote (openraft's voters refuse votes while their leader's lease runs), so its
    /// session counts from then. When the controller leader's host dies, its partitions
    /// then fail over that much sooner; a host wrongly counted silent is only fenced
    /// early, and unfenced on its next heartbeat.
    fn start_sessions(&self, previous: Option<u64>) {
        let now = Instant::now();
        let silent_since = now
            .checked_sub(Duration::from_millis(ELECTION_TIMEOUT_MAX_MS))
            .unwrap_or(now);
        let mut beats = self.heartbeats.lock().unwrap_or_else(|p| p.into_inner());
        for host in self.applied().state.hosts.keys() {
            let replaced = previous == Some(u64::from(*host)) && previous != Some(self.id);
            beats.insert(*host, if replaced { silent_since } else { now });
        }
    }

    /// On the leader, fences every host silent for longer than the session timeout;
    /// runs until the runtime stops.
    pub async fn fence_silent_hosts(self: Arc<Self>) {
        let mut was_leader = false;
        // The leader this voter last followed.
        let mut previous: Option<u64> = None;
        loop {
            tokio::time::sleep(FENCE_CHECK).await;
            let leader = self.is_leader();
            if leader && !was_leader {
                self.start_sessions(previous);
            }
            was_leader = leader;
            if !leader {
                // (A candidate knows no leader: keep the last one it followed.)
                if let Some(l) = self.raft.metrics().borrow().current_leader {
                    previous = Some(l);
                }
                continue;
            }
            let applied = self.applied();
            for (host, record) in &applied.state.hosts {
                if record.fenced || self.heard_within(*host, self.config.session_timeout) {
                    continue;
                }
                tracing::warn!(host, timeout = ?self.config.session_timeout, "fencing a silent host: its partitions have no leader until it returns");
                if let Err(e) = self
                    .propose(Command::SetFenced {
                        host: *host,
                        fenced: true,
                    })
                    .await
                {
                    tracing::warn!(host, error = %e, "could not fence host");
                }
                self.membership_changed();
            }
            let quiet = self
                .membership_changed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .elapsed()
                >= PREFERRED_LEADER_QUIET;
            if quiet && self.config.auto_leader_rebalance && applied.state.preferred_leaders_due() {
                tracing::info!("moving leadership back to preferred replicas");
                if let Err(e) = self.propose(Command::PreferLeaders).await {
                    tracing::warn!(error = %e, "could not move leadership back");
                }
            }
        }
    }
}
