//! A leader shard's replication throttle (Kafka's `leader.replication.throttled.rate`):
//! the bytes it sends to followers of throttled replicas that are not in sync — the
//! replicas a reassignment adds — draw from one bucket refilled at the rate, holding at
//! most a second of it. While the bucket is empty those partitions are answered without
//! records (their offsets only), as Kafka leaves a throttled partition out of a fetch
//! once its quota is spent; in-sync followers are never held back.

use std::{cell::Cell, time::Instant};

use super::Replication;
use crate::metadata::{
    partition_state::PartitionState,
    placement::NodeId,
    replication_throttle::{ThrottledReplicas, LEADER_REPLICAS},
    topic_config::TopicConfigs,
};

/// The shard's bucket: bytes it may still send, and when it was last refilled.
#[derive(Debug, Default)]
pub struct LeaderThrottle {
    tokens: Cell<f64>,
    refilled: Cell<Option<Instant>>,
}

impl LeaderThrottle {
    /// True when a throttled partition may be sent records now at `rate` bytes a second.
    pub fn allows(&self, rate: u64, now: Instant) -> bool {
        self.refill(rate, now);
        self.tokens.get() > 0.0
    }

    /// Takes `bytes` sent to a throttled follower out of the bucket (it may go below
    /// zero: the next sends wait until the rate has made up for it).
    pub fn spend(&self, bytes: usize) {
        self.tokens.set(self.tokens.get() - bytes as f64);
    }

    fn refill(&self, rate: u64, now: Instant) {
        let rate = rate as f64;
        let tokens = match self.refilled.get() {
            // A new bucket starts full.
            None => rate,
            Some(at) => self.tokens.get() + rate * now.saturating_duration_since(at).as_secs_f64(),
        };
        self.tokens.set(tokens.min(rate));
        self.refilled.set(Some(now));
    }
}

impl Replication {
    /// The rate the fetch of `partition` by `follower` is throttled at, from this leader
    /// `node`: its topic names this replica in `leader.replication.throttled.replicas`,
    /// the node has a `leader.replication.throttled.rate`, and the follower is not in the
    /// ISR. `None`: not throttled.
    pub fn throttled_rate(
        rate: Option<u64>,
        configs: &TopicConfigs,
        state: &PartitionState,
        partition: i32,
        node: NodeId,
        follower: NodeId,
    ) -> Option<u64> {
        let rate = rate?;
        let replicas = ThrottledReplicas::parse(configs.get(LEADER_REPLICAS)?)?;
        (replicas.contains(partition, node) && !state.isr.contains(&follower)).then_some(rate)
    }

    /// This shard's leader throttle bucket.
    pub fn leader_throttle(&self) -> &LeaderThrottle {
        &self.throttle
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_bucket_holds_a_second_and_refills_at_the_rate() {
        let bucket = LeaderThrottle::default();
        let t0 = Instant::now();
        assert!(bucket.allows(1000, t0));
        bucket.spend(1500);
        assert!(
            !bucket.allows(1000, t0 + Duration::from_millis(400)),
            "-100"
        );
        assert!(bucket.allows(1000, t0 + Duration::from_millis(600)), "+100");
        // Idle for a minute: still only a second's worth.
        assert!(bucket.allows(1000, t0 + Duration::from_secs(60)));
        bucket.spend(1001);
        assert!(!bucket.allows(1000, t0 + Duration::from_secs(60)));
    }

    #[test]
    fn only_named_replicas_with_out_of_sync_followers_are_throttled() {
        let mut configs = TopicConfigs::new();
        configs.insert(LEADER_REPLICAS.into(), "0:1024".into());
        let mut state = PartitionState::new(vec![1024, 2048, 3072]);
        state.isr = vec![1024, 2048];
        let rate = |partition, follower| {
            Replication::throttled_rate(Some(50), &configs, &state, partition, 1024, follower)
        };
        assert_eq!(rate(0, 3072), Some(50), "the out-of-sync follower");
        assert_eq!(rate(0, 2048), None, "an in-sync follower");
        assert_eq!(rate(1, 3072), None, "another partition");
        assert_eq!(
            Replication::throttled_rate(None, &configs, &state, 0, 1024, 3072),
            None,
            "no rate on this broker"
        );
    }
}
