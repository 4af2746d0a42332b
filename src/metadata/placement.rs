//! Where partitions and groups live: pure functions, so every shard computes the same
//! answer without a table to keep in sync.

use std::net::SocketAddr;

/// Index of a shard (and, on a single broker, its node id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub usize);

/// A stable hash of a name: CRC-32C, the same on every run and machine.
fn name_hash(name: &str) -> u64 {
    u64::from(crc32c::crc32c(name.as_bytes()))
}

/// The shard that owns partition `partition` of `topic`: `(hash(topic) + partition) %
/// shards`, so one topic's partitions spread evenly over the shards.
pub fn partition_shard(topic: &str, partition: u32, shards: usize) -> ShardId {
    ShardId(((name_hash(topic) + u64::from(partition)) % shards as u64) as usize)
}

/// The address shard `shard` listens on: the broker's listen address with the port moved
/// up by the shard index (every shard is its own Kafka node on its own port).
pub fn shard_addr(listen: SocketAddr, shard: ShardId) -> SocketAddr {
    let mut addr = listen;
    addr.set_port(listen.port() + shard.0 as u16);
    addr
}

/// The shard that coordinates consumer group `group`.
pub fn group_shard(group: &str, shards: usize) -> ShardId {
    ShardId((name_hash(group) % shards as u64) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topics_partitions_spread_over_all_shards() {
        let shards = 4;
        let mut seen = [0; 4];
        for p in 0..8 {
            seen[partition_shard("orders", p, shards).0] += 1;
        }
        assert_eq!(seen, [2, 2, 2, 2]);
        assert_eq!(partition_shard("orders", 3, 1), ShardId(0));
        assert_eq!(group_shard("g", 3), group_shard("g", 3));
    }
}
