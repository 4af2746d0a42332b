//! Who does what: partitions split between clients, each client's partitions grouped by
//! leader into streams (one connection each), the target rate and message count split
//! between streams in proportion to their partitions, and streams dealt out to cores.

use std::collections::BTreeMap;

use weir_client::metadata::Topology;

use crate::{assign::partitions_of, consumer::FetchStream, producer::ProduceStream};

fn by_leader(topology: &Topology, partitions: Vec<i32>) -> BTreeMap<String, Vec<i32>> {
    let mut grouped: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for partition in partitions {
        if let Some(leader) = topology.leaders.get(&partition) {
            grouped.entry(leader.clone()).or_default().push(partition);
        }
    }
    grouped
}

/// The producer streams of `producers` clients sharing `rate` messages per second
/// (0 = open throttle) and, if given, `messages` messages.
pub fn produce_streams(
    topology: &Topology,
    producers: usize,
    rate: f64,
    messages: Option<u64>,
) -> Vec<ProduceStream> {
    let all: Vec<i32> = topology.leaders.keys().copied().collect();
    let mut streams = Vec::new();
    for client in 0..producers {
        for (leader, partitions) in by_leader(topology, partitions_of(&all, client, producers)) {
            streams.push(ProduceStream {
                id: streams.len() as u64,
                leader,
                partitions,
                rate: 0.0,
                messages: None,
            });
        }
    }
    let weight_total: usize = streams.iter().map(|s| s.partitions.len()).sum();
    let mut messages_left = messages;
    let count = streams.len();
    for (i, stream) in streams.iter_mut().enumerate() {
        let share = stream.partitions.len() as f64 / weight_total as f64;
        stream.rate = rate * share;
        stream.messages = match (messages, messages_left.as_mut()) {
            (Some(total), Some(left)) => {
                let mine = if i + 1 == count {
                    *left
                } else {
                    ((total as f64 * share).floor() as u64).min(*left)
                };
                *left -= mine;
                Some(mine)
            }
            _ => None,
        };
    }
    streams.retain(|s| s.messages != Some(0));
    streams
}

/// The consumer streams of `consumers` clients starting at `start` offsets. Clients
/// beyond the partition count get nothing (two consumers of one partition would read
/// every message twice).
pub fn fetch_streams(
    topology: &Topology,
    consumers: usize,
    start: &BTreeMap<i32, i64>,
) -> Vec<FetchStream> {
    let all: Vec<i32> = topology.leaders.keys().copied().collect();
    let mut streams = Vec::new();
    for client in 0..consumers.min(all.len()) {
        for (leader, partitions) in by_leader(
            topology,
            partitions_of(&all, client, consumers.min(all.len())),
        ) {
            streams.push(FetchStream {
                leader,
                partitions: partitions
                    .into_iter()
                    .map(|p| (p, start.get(&p).copied().unwrap_or(0)))
                    .collect(),
            });
        }
    }
    streams
}

/// Deals `items` out to `cores` cores in turn.
pub fn deal<T>(items: Vec<T>, cores: usize) -> Vec<Vec<T>> {
    let mut dealt: Vec<Vec<T>> = (0..cores).map(|_| Vec::new()).collect();
    for (i, item) in items.into_iter().enumerate() {
        dealt[i % cores].push(item);
    }
    dealt
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(partitions: i32, leaders: usize) -> Topology {
        Topology {
            topic: "t".into(),
            leaders: (0..partitions)
                .map(|p| (p, format!("host:{}", 9092 + p as usize % leaders)))
                .collect(),
        }
    }

    #[test]
    fn every_partition_gets_a_producer_and_the_rate_splits_by_partition() {
        let streams = produce_streams(&topology(10, 2), 3, 1000.0, Some(1001));
        let mut covered: Vec<i32> = streams.iter().flat_map(|s| s.partitions.clone()).collect();
        covered.sort_unstable();
        assert_eq!(covered, (0..10).collect::<Vec<_>>());
        let rate: f64 = streams.iter().map(|s| s.rate).sum();
        assert!((rate - 1000.0).abs() < 1e-6);
        assert_eq!(
            streams.iter().map(|s| s.messages.unwrap()).sum::<u64>(),
            1001
        );
        for s in &streams {
            assert!((s.rate - 100.0 * s.partitions.len() as f64).abs() < 1e-6);
            assert!(s
                .partitions
                .iter()
                .all(|p| format!("host:{}", 9092 + *p as usize % 2) == s.leader));
        }
    }

    #[test]
    fn more_producers_than_partitions_share_them_and_consumers_do_not() {
        let t = topology(2, 1);
        let producers = produce_streams(&t, 5, 500.0, None);
        assert_eq!(producers.len(), 5);
        assert!(producers.iter().all(|s| (s.rate - 100.0).abs() < 1e-6));
        let consumers = fetch_streams(&t, 5, &BTreeMap::from([(0, 7), (1, 9)]));
        assert_eq!(consumers.len(), 2);
        assert_eq!(consumers[0].partitions, vec![(0, 7)]);
        assert_eq!(consumers[1].partitions, vec![(1, 9)]);
    }

    #[test]
    fn dealing_spreads_streams_over_cores() {
        assert_eq!(
            deal(vec![1, 2, 3, 4, 5], 2),
            vec![vec![1, 3, 5], vec![2, 4]]
        );
    }
}
