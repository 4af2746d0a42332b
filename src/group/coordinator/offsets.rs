//! Offsets: OffsetCommit's fencing and write, OffsetDelete and DeleteGroups at one
//! shard's coordinator, each journaled first on a cluster and answered once durable.

use std::{sync::Arc, time::Instant};

use kafka_protocol::ResponseError;

use super::{journal_first, Coordinator, OffsetToCommit};
use crate::group::{
    journal::{Journal, JournalRecord},
    offset_store::{CommitOutcome, CommittedOffset, Fence},
    state::{Group, GroupState},
};

impl Coordinator {
    /// How a commit by `member_id` of `generation` is fenced, or why it is refused
    /// (OffsetCommit's rules, which TxnOffsetCommit v3+ shares).
    pub(super) fn commit_fence(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<Fence, ResponseError> {
        let mut groups = self.groups.borrow_mut();
        if groups
            .get(group)
            .is_some_and(|g| g.fenced(instance, member_id))
        {
            return Err(ResponseError::FencedInstanceId);
        }
        let g = groups.get_mut(group);
        match g {
            None if generation < 0 => Ok(Fence::Reset),
            None => Err(ResponseError::IllegalGeneration),
            Some(g) if generation < 0 && member_id.is_empty() => {
                if g.members.is_empty() {
                    Ok(Fence::Reset)
                } else {
                    Err(ResponseError::UnknownMemberId)
                }
            }
            Some(g) => match g.members.get_mut(member_id) {
                None => Err(ResponseError::UnknownMemberId),
                Some(_) if generation != g.generation => Err(ResponseError::IllegalGeneration),
                // As Kafka: a member of the current generation may commit while
                // the group prepares a rebalance (consumers commit what they
                // processed when their partitions are revoked), but not between
                // the join and the new assignment.
                Some(_) if g.state == GroupState::CompletingRebalance => {
                    Err(ResponseError::RebalanceInProgress)
                }
                Some(m) => {
                    m.last_seen = Instant::now();
                    Ok(Fence::Generation(generation))
                }
            },
        }
    }

    /// OffsetCommit: checks the committer, writes the offsets (on the blocking pool) and
    /// answers once they are durable; one error code per partition.
    pub async fn commit(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        instance: Option<&str>,
        offsets: Vec<OffsetToCommit>,
        journal: Option<Journal>,
    ) -> Vec<Result<(), ResponseError>> {
        let fence = match self.commit_fence(group, generation, member_id, instance) {
            Ok(f) => f,
            Err(e) => return offsets.iter().map(|_| Err(e)).collect(),
        };
        let n = offsets.len();
        // Committed to the journal first: applied here only what survives a host.
        let _pass = match journal_first(journal.as_ref(), || JournalRecord::Commit {
            group: group.to_string(),
            fence,
            offsets: offsets.clone(),
        })
        .await
        {
            Ok(pass) => pass,
            Err(code) => return vec![Err(code); n],
        };
        let store = Arc::clone(&self.store);
        let group_id = group.to_string();
        let written = glommio::executor()
            .spawn_blocking(move || {
                let refs: Vec<(&str, u32, CommittedOffset)> = offsets
                    .iter()
                    .map(|(t, p, c)| (t.as_str(), *p, c.clone()))
                    .collect();
                store.commit(&group_id, fence, &refs)
            })
            .await;
        let outcomes = match written {
            Ok(o) => o,
            Err(e) => {
                tracing::error!(group, error = %e, "offset commit failed");
                return vec![Err(ResponseError::KafkaStorageError); n];
            }
        };
        if let Err(e) = self.syncer.sync().await {
            tracing::error!(group, error = %e, "offset sync failed");
            return vec![Err(ResponseError::KafkaStorageError); n];
        }
        outcomes
            .iter()
            .map(|o| match o {
                CommitOutcome::Applied | CommitOutcome::Unchanged => Ok(()),
            })
            .collect()
    }

    /// OffsetDelete: removes the group's committed offsets of the given partitions. A
    /// topic the group's members consume is refused per partition with
    /// GROUP_SUBSCRIBED_TO_TOPIC; a group with neither members nor offsets is
    /// GROUP_ID_NOT_FOUND.
    pub async fn delete_offsets(
        &self,
        group: &str,
        partitions: Vec<(String, u32)>,
        journal: Option<Journal>,
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let subscribed = self
            .groups
            .borrow()
            .get(group)
            .map(Group::subscribed_topics);
        let consumed = |topic: &str| match &subscribed {
            None => false,
            Some(None) => true,
            Some(Some(topics)) => topics.contains(topic),
        };
        let outcomes: Vec<Result<(), ResponseError>> = partitions
            .iter()
            .map(|(topic, _)| {
                if consumed(topic) {
                    Err(ResponseError::GroupSubscribedToTopic)
                } else {
                    Ok(())
                }
            })
            .collect();
        let doomed: Vec<(String, u32)> = partitions
            .into_iter()
            .zip(&outcomes)
            .filter(|(_, o)| o.is_ok())
            .map(|(p, _)| p)
            .collect();
        let journal = journal.filter(|_| !doomed.is_empty());
        let _pass = journal_first(journal.as_ref(), || JournalRecord::DeleteOffsets {
            group: group.to_string(),
            partitions: doomed.clone(),
        })
        .await?;
        let store = Arc::clone(&self.store);
        let id = group.to_string();
        let known = subscribed.is_some();
        let result = glommio::executor()
            .spawn_blocking(move || {
                let has_offsets = !store.fetch_group(&id)?.is_empty();
                let deleted = store.delete_offsets(&id, &doomed)?;
                Ok::<_, crate::group::offset_store::OffsetStoreError>((has_offsets, deleted))
            })
            .await;
        match result {
            Ok((false, _)) if !known => Err(ResponseError::GroupIdNotFound),
            Ok((_, 0)) => Ok(outcomes),
            Ok(_) => match self.syncer.sync().await {
                Ok(()) => Ok(outcomes),
                Err(e) => {
                    tracing::error!(group, error = %e, "offset sync failed");
                    Err(ResponseError::KafkaStorageError)
                }
            },
            Err(e) => {
                tracing::error!(group, error = %e, "deleting offsets failed");
                Err(ResponseError::KafkaStorageError)
            }
        }
    }

    /// Deletes a group with no members and its committed offsets.
    pub async fn delete(&self, group: &str, journal: Option<Journal>) -> Result<(), ResponseError> {
        if self
            .groups
            .borrow()
            .get(group)
            .is_some_and(|g| !g.members.is_empty())
        {
            return Err(ResponseError::NonEmptyGroup);
        }
        let _pass = journal_first(journal.as_ref(), || JournalRecord::DeleteGroup {
            group: group.to_string(),
        })
        .await?;
        {
            let mut groups = self.groups.borrow_mut();
            if let Some(g) = groups.get(group) {
                if !g.members.is_empty() {
                    return Err(ResponseError::NonEmptyGroup);
                }
                groups.remove(group);
            }
        }
        let store = Arc::clone(&self.store);
        let id = group.to_string();
        match glommio::executor()
            .spawn_blocking(move || store.delete_group(&id))
            .await
        {
            Ok(0) => Err(ResponseError::GroupIdNotFound),
            Ok(_) => self.syncer.sync().await.map_err(|e| {
                tracing::error!(group, error = %e, "offset sync failed");
                ResponseError::KafkaStorageError
            }),
            Err(e) => {
                tracing::error!(group, error = %e, "deleting group offsets failed");
                Err(ResponseError::KafkaStorageError)
            }
        }
    }
}
