//! The registry's security metadata: users' SCRAM credentials, read at every login and
//! changed like the topics — through the controller quorum on a cluster host, in the
//! registry file on a single host — and visible only once durable.

use std::sync::{atomic::Ordering, Arc};

use crate::{
    metadata::cluster_state::MetadataChange,
    security::{
        credentials::{ScramCredential, ScramHash, Users},
        state::SecurityChange,
    },
};

use super::{write_json, Backend, RegistryError, RegistryFile, TopicRegistry};

impl TopicRegistry {
    /// `user`'s credential for `hash`, if it has one.
    pub fn scram_credential(&self, user: &str, hash: ScramHash) -> Option<ScramCredential> {
        self.state().cluster.security.users.get(user, hash).cloned()
    }

    /// Every user's credentials.
    pub fn users(&self) -> Users {
        self.state().cluster.security.users.clone()
    }

    /// Applies `change`, durably, then makes it visible. Changes on one host apply one
    /// at a time, so none is lost to another.
    pub async fn alter_security(
        self: &Arc<Self>,
        change: SecurityChange,
    ) -> Result<(), RegistryError> {
        if matches!(self.backend, Backend::Controller(_)) {
            return self.ask_controller(MetadataChange::Security(change)).await;
        }
        let me = Arc::clone(self);
        glommio::executor()
            .spawn_blocking(move || {
                let _writer = me.write.lock().unwrap_or_else(|p| p.into_inner());
                let (file, security) = {
                    let s = me.state();
                    let mut security = s.cluster.security.clone();
                    security.apply(&change);
                    let topics = s.cluster.topics.values().chain(s.pending.values());
                    let file = RegistryFile {
                        topics: topics.cloned().collect(),
                        security: security.clone(),
                    };
                    (file, security)
                };
                write_json(&me.path, &file)?;
                me.state().cluster.security = security;
                me.version.fetch_add(1, Ordering::AcqRel);
                Ok(())
            })
            .await
    }
}
