//! How a cluster host's registry asks the controller quorum: a metadata change, waited
//! for until this host has installed the metadata that holds it, and the quorum's
//! replication as its leader sees it. A single host has no controller and answers
//! itself.

use super::{Backend, RegistryError, TopicRegistry, PUBLISH_WAIT};
use crate::metadata::{
    cluster_state::{MetadataChange, MetadataError},
    controller_link::{unix_ms, ControllerCall, QuorumMember, QuorumStatus},
};

impl TopicRegistry {
    /// True when a controller quorum keeps the metadata (several hosts may hold
    /// replicas), false for a single host.
    pub fn is_clustered(&self) -> bool {
        matches!(self.backend, Backend::Controller(_))
    }

    /// Sends `change` to the controller and waits until this host has installed the
    /// metadata that includes it. A single host has no controller: nothing is asked.
    pub async fn ask_controller(&self, change: MetadataChange) -> Result<(), RegistryError> {
        let Backend::Controller(link) = &self.backend else {
            return Ok(());
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        link.send(ControllerCall::Change { change, reply })
            .map_err(|_| agent_gone())?;
        let index = answer.await.map_err(|_| agent_gone())??;
        let deadline = std::time::Instant::now() + PUBLISH_WAIT;
        while self.version() < index {
            if std::time::Instant::now() > deadline {
                return Err(MetadataError::Unavailable(format!(
                    "change applied at index {index} has not reached this host"
                ))
                .into());
            }
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
        Ok(())
    }

    /// The controller quorum as its leader sees it. A single host is a quorum of one:
    /// itself, leading since it started, holding every version it wrote.
    pub async fn describe_quorum(&self) -> Result<QuorumStatus, RegistryError> {
        let host = match &self.backend {
            Backend::Local { host } => u64::from(*host),
            Backend::Controller(link) => {
                let (reply, answer) = tokio::sync::oneshot::channel();
                link.send(ControllerCall::Quorum { reply })
                    .map_err(|_| agent_gone())?;
                return Ok(answer.await.map_err(|_| agent_gone())??);
            }
        };
        let end = self.version() + 1;
        let now = unix_ms();
        Ok(QuorumStatus {
            leader: host,
            term: 1,
            high_watermark: end,
            voters: vec![QuorumMember {
                host,
                log_end: Some(end),
                last_heard_ms: Some(now),
                caught_up_ms: Some(now),
                address: None,
            }],
            observers: Vec::new(),
        })
    }
}

/// The error of a call the host's controller agent can no longer take.
fn agent_gone() -> MetadataError {
    MetadataError::Unavailable("the controller agent has stopped".into())
}
