//! The one mapping from weir's internal errors to the Kafka error codes clients see, so
//! the same failure never means two things to two APIs.

use kafka_protocol::ResponseError;

use crate::{
    metadata::partition_error::PartitionError,
    metadata::{cluster_state::MetadataError, registry::RegistryError},
    shard::txn_marking::MarkerError,
    storage::{producer_state::SequenceError, BatchError, StorageError},
};

/// An internal error as the Kafka error a client should see.
pub trait KafkaError {
    /// The Kafka error.
    fn kafka_error(&self) -> ResponseError;

    /// Its wire code.
    fn code(&self) -> i16 {
        self.kafka_error().code()
    }
}

/// PRODUCER_FENCED as a request version before `since` says it: INVALID_PRODUCER_EPOCH
/// (KIP-588 gave the transactional APIs PRODUCER_FENCED); any other error unchanged.
pub fn fenced_before(error: ResponseError, version: i16, since: i16) -> ResponseError {
    match error {
        ResponseError::ProducerFenced if version < since => ResponseError::InvalidProducerEpoch,
        other => other,
    }
}

impl KafkaError for BatchError {
    fn kafka_error(&self) -> ResponseError {
        match self {
            BatchError::TooLarge { .. } => ResponseError::MessageTooLarge,
            BatchError::UnsupportedMagic(_) => ResponseError::UnsupportedForMessageFormat,
            BatchError::Empty => ResponseError::InvalidRequest,
            _ => ResponseError::CorruptMessage,
        }
    }
}

impl KafkaError for StorageError {
    fn kafka_error(&self) -> ResponseError {
        match self {
            StorageError::InvalidBatch(b) => b.kafka_error(),
            StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            StorageError::Sequence(SequenceError::OutOfOrder { .. }) => {
                ResponseError::OutOfOrderSequenceNumber
            }
            StorageError::Sequence(SequenceError::StaleEpoch { .. }) => {
                ResponseError::InvalidProducerEpoch
            }
            StorageError::Sequence(
                SequenceError::DuplicateInPayload { .. } | SequenceError::StoredLongAgo { .. },
            ) => ResponseError::DuplicateSequenceNumber,
            // Closed while the request waited: the partition was deleted or the shard
            // is stopping; the client refreshes metadata and retries elsewhere.
            StorageError::Closed(_) | StorageError::NotLeader(_) => {
                ResponseError::NotLeaderOrFollower
            }
            StorageError::NotContiguous { .. } => ResponseError::UnknownServerError,
            StorageError::Io { .. }
            | StorageError::Fenced { .. }
            | StorageError::Corrupt { .. }
            | StorageError::OffsetOverflow(_)
            | StorageError::InvalidConfig(_) => ResponseError::KafkaStorageError,
        }
    }
}

impl KafkaError for PartitionError {
    fn kafka_error(&self) -> ResponseError {
        match self {
            PartitionError::Unknown => ResponseError::UnknownTopicOrPartition,
            PartitionError::NotOwner => ResponseError::NotLeaderOrFollower,
            PartitionError::Storage => ResponseError::KafkaStorageError,
        }
    }
}

impl KafkaError for MarkerError {
    fn kafka_error(&self) -> ResponseError {
        match self {
            MarkerError::Partition(e) => e.kafka_error(),
            MarkerError::NotLeader => ResponseError::NotLeaderOrFollower,
            MarkerError::Storage(e) => e.kafka_error(),
            MarkerError::Group(e) => *e,
        }
    }
}

/// The wire code of a result whose error is already Kafka's: 0 for success.
pub fn code_of<T>(result: &Result<T, ResponseError>) -> i16 {
    result.as_ref().err().map_or(0, |e| e.code())
}

impl KafkaError for RegistryError {
    fn kafka_error(&self) -> ResponseError {
        match self {
            RegistryError::AlreadyExists(_) => ResponseError::TopicAlreadyExists,
            RegistryError::Unknown(_) => ResponseError::UnknownTopicOrPartition,
            RegistryError::CannotShrink { .. } => ResponseError::InvalidPartitions,
            RegistryError::Config(_) => ResponseError::InvalidConfig,
            RegistryError::InProgress(_) => ResponseError::RequestTimedOut,
            RegistryError::Cluster(e) => e.kafka_error(),
            RegistryError::File(_) => ResponseError::KafkaStorageError,
        }
    }
}

impl KafkaError for MetadataError {
    fn kafka_error(&self) -> ResponseError {
        match self {
            MetadataError::AlreadyExists(_) => ResponseError::TopicAlreadyExists,
            MetadataError::Unknown(_) => ResponseError::UnknownTopicOrPartition,
            MetadataError::CannotShrink { .. } => ResponseError::InvalidPartitions,
            MetadataError::InvalidConfig(_) => ResponseError::InvalidConfig,
            // Kafka's answer when too few brokers are alive to place replicas.
            MetadataError::NoBrokers | MetadataError::ReplicationFactor { .. } => {
                ResponseError::InvalidReplicationFactor
            }
            // A leader that lost its epoch is no longer the leader.
            MetadataError::StaleLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
            MetadataError::InvalidIsr { .. } => ResponseError::InvalidRequest,
            // The quorum lost its majority (or is electing): the client retries.
            MetadataError::NotLeader { .. } => ResponseError::NotController,
            MetadataError::Unavailable(_)
            | MetadataError::Refused(_)
            | MetadataError::NotRegistered(_)
            | MetadataError::Conflict(_) => ResponseError::RequestTimedOut,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_closed_partition_means_the_same_to_every_api() {
        let closed = StorageError::Closed(PathBuf::from("t-0"));
        assert_eq!(closed.kafka_error(), ResponseError::NotLeaderOrFollower);
        assert_eq!(
            StorageError::InvalidBatch(BatchError::Empty).kafka_error(),
            ResponseError::InvalidRequest
        );
        assert_eq!(code_of::<()>(&Ok(())), 0);
        assert_eq!(
            code_of::<()>(&Err(ResponseError::NotCoordinator)),
            ResponseError::NotCoordinator.code()
        );
    }
}
