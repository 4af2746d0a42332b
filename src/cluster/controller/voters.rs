//! Changing the controller quorum while it runs (`weir cluster add-voter/remove-voter`,
//! what Kafka's KIP-853 AddRaftVoter/RemoveRaftVoter do): the leader first replicates
//! the metadata log to a new controller as a learner until it holds everything, then
//! commits the new voter set through openraft's joint consensus, so a majority of the
//! old voters and of the new agree at every step and metadata writes go on throughout.

use std::collections::BTreeSet;

use openraft::{BasicNode, ChangeMembers};

use super::{Controller, COMMIT_TIMEOUT};
use crate::metadata::cluster_state::MetadataError;

/// How long a new voter may take to catch up with the metadata log before the change
/// is given up (it stays a learner; asking again resumes).
const CATCH_UP_MAX: std::time::Duration = std::time::Duration::from_secs(30);

impl Controller {
    /// The voters now: id and controller address, by id.
    pub(super) fn voters(&self) -> Vec<(u64, String)> {
        let metrics = self.raft.metrics().borrow().clone();
        metrics
            .membership_config
            .membership()
            .voter_ids()
            .filter_map(|id| {
                let node = metrics.membership_config.membership().get_node(&id)?;
                Some((id, node.addr.clone()))
            })
            .collect()
    }

    /// Makes the controller `id` at `address` a voter once it holds the whole metadata
    /// log; the voters after the change. Adding a voter again is a no-op.
    pub(super) async fn add_voter(
        &self,
        id: u64,
        address: String,
    ) -> Result<Vec<(u64, String)>, MetadataError> {
        self.leader_only()?;
        let voters = self.voters();
        if let Some((_, at)) = voters.iter().find(|(v, _)| *v == id) {
            return if *at == address {
                Ok(voters)
            } else {
                Err(MetadataError::Refused(format!(
                    "voter {id} is at {at}, not {address}: remove it first"
                )))
            };
        }
        if address.parse::<std::net::SocketAddr>().is_err() {
            return Err(MetadataError::Refused(format!(
                "{address} is not a HOST:PORT controller address"
            )));
        }
        tracing::info!(voter = id, %address, "adding a voter: replicating the metadata log to it");
        let caught_up = self
            .raft
            .add_learner(id, BasicNode::new(address.clone()), true);
        match tokio::time::timeout(CATCH_UP_MAX, caught_up).await {
            Err(_) => {
                return Err(MetadataError::Unavailable(format!(
                    "controller {id} at {address} did not catch up within {CATCH_UP_MAX:?}: is it running with --process-roles controller?"
                )))
            }
            Ok(result) => result.map_err(|e| raft_error(&e))?,
        };
        let mut ids: BTreeSet<u64> = voters.iter().map(|(v, _)| *v).collect();
        ids.insert(id);
        self.change_voters(ids).await
    }

    /// Takes controller `id` out of the quorum; the voters after the change. The last
    /// voter stays. Removing the leader hands leadership to another voter.
    pub(super) async fn remove_voter(&self, id: u64) -> Result<Vec<(u64, String)>, MetadataError> {
        self.leader_only()?;
        let voters = self.voters();
        let mut ids: BTreeSet<u64> = voters.iter().map(|(v, _)| *v).collect();
        if !ids.remove(&id) {
            return Err(MetadataError::Refused(format!("{id} is not a voter")));
        }
        if ids.is_empty() {
            return Err(MetadataError::Refused(
                "the last voter cannot be removed".into(),
            ));
        }
        tracing::info!(voter = id, "removing a voter");
        self.change_voters(ids).await
    }

    /// Commits `ids` as the voter set (a learner left out is dropped).
    async fn change_voters(&self, ids: BTreeSet<u64>) -> Result<Vec<(u64, String)>, MetadataError> {
        let change = self
            .raft
            .change_membership(ChangeMembers::ReplaceAllVoters(ids), false);
        match tokio::time::timeout(COMMIT_TIMEOUT, change).await {
            Err(_) => Err(MetadataError::Unavailable(format!(
                "no majority committed the new voters within {COMMIT_TIMEOUT:?}"
            ))),
            Ok(Err(e)) => Err(raft_error(&e)),
            Ok(Ok(_)) => {
                self.membership_changed();
                Ok(self.voters())
            }
        }
    }
}

/// A failed membership change as the caller is told: redirected to the leader, or the
/// reason.
fn raft_error(
    e: &openraft::error::RaftError<u64, openraft::error::ClientWriteError<u64, BasicNode>>,
) -> MetadataError {
    match e.forward_to_leader::<BasicNode>() {
        Some(f) => MetadataError::NotLeader {
            leader: f.leader_node.as_ref().map(|n| n.addr.clone()),
        },
        None => MetadataError::Unavailable(e.to_string()),
    }
}
