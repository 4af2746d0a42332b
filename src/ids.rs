//! Ids and epochs as types of their own, so a call that takes several of them cannot
//! have two swapped: a producer's id and epoch ([`ProducerIdentity`]), the epoch of a
//! transaction coordinator ([`CoordinatorEpoch`]) and of a partition's leader
//! ([`LeaderEpoch`]). Each wraps the integer Kafka's wire carries, which `.0` gives
//! back at the wire's edge.

/// A producer id, as InitProducerId hands it out (Kafka's `producerId`, an `int64`);
/// -1 on the wire means none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProducerId(pub i64);

/// A producer id's epoch (Kafka's `producerEpoch`, an `int16`): a bumped one fences the
/// producer's older instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProducerEpoch(pub i16);

impl ProducerEpoch {
    /// The largest epoch before a producer id is replaced by a new one (Kafka's
    /// `Short.MaxValue - 1`): a marker at it ends the producer's transactions for
    /// good, as no later epoch of the id can follow.
    pub const MAX: ProducerEpoch = ProducerEpoch(i16::MAX - 1);
}

/// A producer as a partition and a coordinator know it: its id at one epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdentity {
    /// The id.
    pub id: ProducerId,
    /// Its epoch.
    pub epoch: ProducerEpoch,
}

impl ProducerIdentity {
    /// Producer `id` at `epoch`, as the wire carries them.
    pub fn new(id: i64, epoch: i16) -> ProducerIdentity {
        ProducerIdentity {
            id: ProducerId(id),
            epoch: ProducerEpoch(epoch),
        }
    }
}

/// The epoch of a transaction coordinator (Kafka's `coordinatorEpoch`): its journal
/// partition's leader epoch on a cluster, 0 on a single host. A marker carries it so a
/// partition can tell a stale coordinator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CoordinatorEpoch(pub i32);

/// The epoch of a partition's leader (Kafka's `leaderEpoch`): the controller bumps it
/// at every leader change, and every batch the leader writes is stamped with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaderEpoch(pub i32);
