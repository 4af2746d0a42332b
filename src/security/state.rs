//! The security part of the cluster metadata: every user's SCRAM credentials and the
//! ACLs. The
//! controller quorum replicates its changes like any other metadata (a single host keeps
//! it in its registry file), so every host checks logins against the same users.

use serde::{Deserialize, Serialize};

use super::{
    acl::AclBinding,
    credentials::{ScramChange, Users},
};

/// The security metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityState {
    /// Every user's SCRAM credentials.
    #[serde(default)]
    pub users: Users,
    /// The ACLs, sorted, without duplicates.
    #[serde(default)]
    pub acls: Vec<AclBinding>,
}

/// One change to the security metadata, applied whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecurityChange {
    /// AlterUserScramCredentials (and `--sasl-user` at start): upserts and deletions,
    /// in order.
    Scram(Vec<ScramChange>),
    /// CreateAcls: bindings added (one already present is not added twice).
    CreateAcls(Vec<AclBinding>),
    /// DeleteAcls: exactly these bindings removed (the asking host resolved its
    /// filters against the ACLs it saw).
    DeleteAcls(Vec<AclBinding>),
}

impl SecurityState {
    /// Applies `change`. Deterministic: the outcome depends only on `self` and `change`.
    pub fn apply(&mut self, change: &SecurityChange) {
        match change {
            SecurityChange::Scram(changes) => self.users.apply(changes),
            SecurityChange::CreateAcls(added) => {
                self.acls.extend(added.iter().cloned());
                self.acls.sort();
                self.acls.dedup();
            }
            SecurityChange::DeleteAcls(removed) => self.acls.retain(|b| !removed.contains(b)),
        }
    }
}
