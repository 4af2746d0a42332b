//! The security part of the cluster metadata: every user's SCRAM credentials. The
//! controller quorum replicates its changes like any other metadata (a single host keeps
//! it in its registry file), so every host checks logins against the same users.

use serde::{Deserialize, Serialize};

use super::credentials::{ScramChange, Users};

/// The security metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityState {
    /// Every user's SCRAM credentials.
    #[serde(default)]
    pub users: Users,
}

/// One change to the security metadata, applied whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecurityChange {
    /// AlterUserScramCredentials (and `--sasl-user` at start): upserts and deletions,
    /// in order.
    Scram(Vec<ScramChange>),
}

impl SecurityState {
    /// Applies `change`. Deterministic: the outcome depends only on `self` and `change`.
    pub fn apply(&mut self, change: &SecurityChange) {
        match change {
            SecurityChange::Scram(changes) => self.users.apply(changes),
        }
    }
}
