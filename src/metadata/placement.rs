//! Where partitions and groups live. Every shard of every host is its own Kafka node,
//! numbered `host node id × 1024 + shard`, on port `base port + shard`. A partition's
//! node is chosen once, when the partition is created, and stored with the topic
//! (`TopicInfo::placement`): it never moves because hosts came or went.

use std::net::SocketAddr;

/// Index of a shard within its host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub usize);

/// A Kafka node id: one shard of one host.
pub type NodeId = i32;

/// Shards a host may have; the stride between two hosts' node ids.
pub const SHARDS_PER_HOST: u32 = 1024;

/// The Kafka node id of shard `shard` of host `host`.
pub fn node_id(host: u32, shard: ShardId) -> NodeId {
    (host * SHARDS_PER_HOST + shard.0 as u32) as NodeId
}

/// The host a node belongs to.
pub fn host_of(node: NodeId) -> u32 {
    node as u32 / SHARDS_PER_HOST
}

/// The shard a node is within its host.
pub fn shard_of(node: NodeId) -> ShardId {
    ShardId((node as u32 % SHARDS_PER_HOST) as usize)
}

/// A stable hash of a name: CRC-32C, the same on every run and machine.
fn name_hash(name: &str) -> u64 {
    u64::from(crc32c::crc32c(name.as_bytes()))
}

/// The nodes of partitions `partitions` of `topic`, placed round-robin over `nodes`
/// from a start that depends on the topic's name, so one topic's partitions spread
/// evenly and different topics start on different nodes. `nodes` should be ordered
/// shard-major (every host's shard 0, then every host's shard 1, …) so consecutive
/// partitions land on different hosts. Empty when `nodes` is.
pub fn place(nodes: &[NodeId], topic: &str, partitions: std::ops::Range<u32>) -> Vec<NodeId> {
    if nodes.is_empty() {
        return Vec::new();
    }
    let start = name_hash(topic);
    partitions
        .map(|p| nodes[((start + u64::from(p)) % nodes.len() as u64) as usize])
        .collect()
}

/// The replicas of partitions led by `leaders`, `factor` each: the leader first, then
/// the same shard (or the last one it has) of each of the next `factor - 1` hosts of
/// `hosts` (host id and shard count, ascending) after the leader's, wrapping around. No
/// two replicas share a host, and a follower shard serves the same core index as its
/// leader. `None` when there are fewer hosts than `factor` or a leader's host is not in
/// `hosts`.
pub fn replicas(
    leaders: &[NodeId],
    hosts: &[(u32, u32)],
    factor: usize,
) -> Option<Vec<Vec<NodeId>>> {
    if factor == 0 || factor > hosts.len() {
        return None;
    }
    leaders
        .iter()
        .map(|&leader| {
            let at = hosts.iter().position(|(h, _)| *h == host_of(leader))?;
            let shard = shard_of(leader).0 as u32;
            let mut set = vec![leader];
            for i in 1..factor {
                let (host, shards) = hosts[(at + i) % hosts.len()];
                set.push(node_id(
                    host,
                    ShardId(shard.min(shards.saturating_sub(1)) as usize),
                ));
            }
            Some(set)
        })
        .collect()
}

/// The address shard `shard` listens on: the host's base address with the port moved
/// up by the shard index (every shard is its own Kafka node on its own port).
pub fn shard_addr(listen: SocketAddr, shard: ShardId) -> SocketAddr {
    let mut addr = listen;
    addr.set_port(listen.port() + shard.0 as u16);
    addr
}

/// Slots in the table of group coordinators (Kafka's `offsets.topic.num.partitions`).
pub const COORDINATOR_SLOTS: usize = 50;

/// The slot of group `group` in the coordinator table.
pub fn coordinator_slot(group: &str, slots: usize) -> usize {
    (name_hash(group) % slots.max(1) as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topics_partitions_spread_over_all_nodes() {
        let nodes: Vec<NodeId> = (0..4).map(|s| node_id(0, ShardId(s))).collect();
        let mut seen = [0; 4];
        for node in place(&nodes, "orders", 0..8) {
            seen[shard_of(node).0] += 1;
        }
        assert_eq!(seen, [2, 2, 2, 2]);
        assert_eq!(place(&nodes[..1], "orders", 3..4), [0]);
        assert!(place(&[], "orders", 0..4).is_empty());
        // Placing more partitions later continues the same round-robin.
        let mut grown = place(&nodes, "orders", 0..3);
        grown.extend(place(&nodes, "orders", 3..8));
        assert_eq!(grown, place(&nodes, "orders", 0..8));
    }

    #[test]
    fn replicas_sit_on_different_hosts() {
        let hosts = [(1, 2), (2, 1), (3, 2)];
        let sets = replicas(&[1024, 1025, 3073], &hosts, 3).expect("three hosts");
        assert_eq!(sets[0], [1024, 2048, 3072]);
        assert_eq!(sets[1], [1025, 2048, 3073], "host 2 has one shard");
        assert_eq!(sets[2], [3073, 1025, 2048]);
        assert_eq!(replicas(&[1024], &hosts, 1), Some(vec![vec![1024]]));
        assert!(replicas(&[1024], &hosts, 4).is_none());
        assert!(replicas(&[9 * 1024], &hosts, 2).is_none());
    }

    #[test]
    fn node_ids_are_host_times_1024_plus_shard() {
        let n = node_id(3, ShardId(5));
        assert_eq!(n, 3 * 1024 + 5);
        assert_eq!((host_of(n), shard_of(n)), (3, ShardId(5)));
        assert_eq!(
            node_id(0, ShardId(1)),
            1,
            "a host 0 keeps single-host node ids"
        );
        assert_eq!(coordinator_slot("g", 50), coordinator_slot("g", 50));
    }
}
