//! The campaign's checker: what the clients said they did, against the log the cluster
//! kept. Every acknowledged record is in the log exactly once, at the offset it was
//! acknowledged at; offsets are dense; every record a consumer was given is still there
//! at that offset; the group's committed offsets never go backwards and keep every
//! acknowledged commit; the producer and every consumer make progress again within a
//! bound after each fault heals. Also the figures: how much was done and how long each
//! fault kept its partitions from acknowledging.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::{history::Event, workload::Files};

/// How soon after a fault heals the producer must have every partition acknowledging
/// again.
pub const PRODUCE_AGAIN_MAX_MS: u64 = 30_000;
/// How soon after a fault heals every consumer must be given records again (a group
/// that rebalances first takes a session timeout or two).
pub const CONSUME_AGAIN_MAX_MS: u64 = 60_000;

/// A record the verifiable producer had acknowledged.
struct Ack {
    value: String,
    partition: i32,
    offset: i64,
    at_ms: u64,
}

/// What the checker found.
pub struct Verdict {
    /// The run's figures, one per line.
    pub figures: String,
    /// Every property that did not hold, with the evidence.
    pub violations: Vec<String>,
}

/// The JSON lines of a verifiable client's output (lines that are not JSON, such as a
/// JVM warning, skipped).
fn events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn int(v: &Value, key: &str) -> i64 {
    v[key].as_i64().unwrap_or(-1)
}

/// Checks the run whose client output is in `files`, the cluster's final log of the
/// checked topic being `log` (`partition offset value` lines, each partition in offset
/// order) and its faults `history`.
pub fn check(files: &Files, consumers: usize, log: &str, history: &[Event]) -> Verdict {
    let mut violations = Vec::new();
    // The log: dense offsets, each value once.
    let mut stored: HashMap<(i32, i64), &str> = HashMap::new();
    let mut at: HashMap<&str, (i32, i64)> = HashMap::new();
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    for line in log.lines() {
        let mut f = line.splitn(3, ' ');
        let (Some(p), Some(o), Some(value)) = (f.next(), f.next(), f.next()) else {
            violations.push(format!("unreadable log line {line:?}"));
            continue;
        };
        let (Ok(p), Ok(o)) = (p.parse::<i32>(), o.parse::<i64>()) else {
            violations.push(format!("unreadable log line {line:?}"));
            continue;
        };
        let expected = next.entry(p).or_insert(0);
        if o != *expected {
            violations.push(format!(
                "partition {p}: offset {o} follows {}",
                *expected - 1
            ));
        }
        *expected = o + 1;
        if let Some(first) = at.insert(value, (p, o)) {
            violations.push(format!(
                "{value:?} stored twice: at {first:?} and {:?}",
                (p, o)
            ));
        }
        stored.insert((p, o), value);
    }
    // The producer's acknowledgements.
    let produced = events(&files.producer());
    let acks: Vec<Ack> = produced
        .iter()
        .filter(|e| e["name"] == "producer_send_success")
        .map(|e| Ack {
            value: e["value"].as_str().unwrap_or_default().to_string(),
            partition: int(e, "partition") as i32,
            offset: int(e, "offset"),
            at_ms: int(e, "timestamp") as u64,
        })
        .collect();
    let send_errors = produced
        .iter()
        .filter(|e| e["name"] == "producer_send_error")
        .count();
    let mut lost = 0;
    for ack in &acks {
        // An acknowledgement without an offset (-1): the producer re-sent a batch older
        // than the ones the leader remembers and was told DUPLICATE_SEQUENCE_NUMBER,
        // which Kafka's clients take as stored. It must be in the log on its partition
        // (once: the log holds each value once, checked above).
        if ack.offset == -1
            && at
                .get(ack.value.as_str())
                .is_some_and(|(p, _)| *p == ack.partition)
        {
            continue;
        }
        match stored.get(&(ack.partition, ack.offset)) {
            Some(v) if *v == ack.value => {}
            other => {
                lost += 1;
                if lost <= 10 {
                    violations.push(format!(
                        "acknowledged {:?} at {}:{}, the log has {other:?} there (and it at {:?})",
                        ack.value,
                        ack.partition,
                        ack.offset,
                        at.get(ack.value.as_str())
                    ));
                }
            }
        }
    }
    if lost > 10 {
        violations.push(format!(
            "{lost} acknowledged records not where acknowledged"
        ));
    }
    // The consumers: what they were given is in the log; when they consumed.
    let mut given = 0;
    let mut consumed_at: Vec<Vec<u64>> = Vec::new();
    let mut best_commit: BTreeMap<i64, i64> = BTreeMap::new();
    for n in 0..consumers {
        let mut times = Vec::new();
        for e in events(&files.consumer(n)) {
            match e["name"].as_str() {
                Some("record_data") => {
                    given += 1;
                    let (p, o) = (int(&e, "partition") as i32, int(&e, "offset"));
                    let value = e["value"].as_str().unwrap_or_default();
                    if stored.get(&(p, o)).copied() != Some(value) {
                        violations.push(format!(
                            "consumer {n} was given {value:?} at {p}:{o}; the log has {:?}",
                            stored.get(&(p, o))
                        ));
                    }
                }
                Some("records_consumed") => times.push(int(&e, "timestamp") as u64),
                Some("offsets_committed") if e["success"] == true => {
                    for c in e["offsets"].as_array().into_iter().flatten() {
                        let best = best_commit.entry(int(c, "partition")).or_insert(0);
                        *best = (*best).max(int(c, "offset"));
                    }
                }
                _ => {}
            }
        }
        consumed_at.push(times);
    }
    // The committed offsets as the coordinator answered them over time.
    let samples = std::fs::read_to_string(files.commits()).unwrap_or_default();
    let mut committed: BTreeMap<i64, (u64, i64)> = BTreeMap::new();
    for line in samples.lines() {
        let f: Vec<i64> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
        let [ms, p, offset] = f[..] else { continue };
        if let Some((then, before)) = committed.insert(p, (ms as u64, offset)) {
            if offset < before {
                violations.push(format!(
                    "partition {p}: committed offset went back from {before} (at {then}) to \
                     {offset} (at {ms})"
                ));
            }
        }
    }
    for (p, best) in &best_commit {
        let last = committed.get(p).map_or(-1, |c| c.1);
        if last < *best {
            violations.push(format!(
                "partition {p}: a commit of {best} was acknowledged, the group keeps {last}"
            ));
        }
    }
    // Progress after each fault, and how long each kept its partitions from
    // acknowledging.
    let mut by_partition: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for ack in &acks {
        by_partition
            .entry(ack.partition)
            .or_default()
            .push(ack.at_ms);
    }
    for times in by_partition.values_mut() {
        times.sort_unstable();
    }
    let mut per_fault: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (n, event) in history.iter().enumerate() {
        for (p, times) in &by_partition {
            let again = times.iter().find(|t| **t > event.heal_ms);
            if again.is_none_or(|t| t - event.heal_ms > PRODUCE_AGAIN_MAX_MS) {
                violations.push(format!(
                    "{} at {}: partition {p} acknowledged nothing within {PRODUCE_AGAIN_MAX_MS} \
                     ms of the heal (next ack {again:?})",
                    event.fault, event.heal_ms
                ));
            }
        }
        for (n, times) in consumed_at.iter().enumerate() {
            let again = times.iter().find(|t| **t > event.heal_ms);
            if again.is_none_or(|t| t - event.heal_ms > CONSUME_AGAIN_MAX_MS) {
                violations.push(format!(
                    "{} at {}: consumer {n} consumed nothing within {CONSUME_AGAIN_MAX_MS} ms \
                     of the heal (next {again:?})",
                    event.fault, event.heal_ms
                ));
            }
        }
        let hit: Vec<i32> = if event.partitions.is_empty() {
            by_partition.keys().copied().collect()
        } else {
            event.partitions.clone()
        };
        // From its start to the bound after its heal, or the next fault if sooner.
        let until = history
            .get(n + 1)
            .map_or(u64::MAX, |next| next.start_ms)
            .min(event.heal_ms + PRODUCE_AGAIN_MAX_MS);
        let window = (event.start_ms, until);
        let gap = hit
            .iter()
            .filter_map(|p| by_partition.get(p))
            .map(|times| longest_gap(times, window))
            .max()
            .unwrap_or(0);
        per_fault.entry(event.fault).or_default().push(gap);
    }
    let longest = by_partition
        .values()
        .map(|t| longest_gap(t, (0, u64::MAX)))
        .max()
        .unwrap_or(0);
    let mut figures = format!(
        "faults injected: {}\nrecords acknowledged: {} (send errors {send_errors})\n\
         records stored: {}\nacknowledged records lost or moved: {lost}\n\
         duplicated: {}\nrecords given to consumers: {given}\n\
         longest time a partition acknowledged nothing: {} ms\n",
        history.len(),
        acks.len(),
        stored.len(),
        violations
            .iter()
            .filter(|v| v.contains("stored twice"))
            .count(),
        longest,
    );
    for (fault, mut gaps) in per_fault {
        gaps.sort_unstable();
        figures.push_str(&format!(
            "{fault}: {} times; the hit partitions' longest wait for an ack p50 {} ms, max {} ms\n",
            gaps.len(),
            gaps[gaps.len() / 2],
            gaps[gaps.len() - 1]
        ));
    }
    Verdict {
        figures,
        violations,
    }
}

/// The longest time between consecutive acknowledgements (`times`, sorted) that
/// overlaps `window`.
fn longest_gap(times: &[u64], window: (u64, u64)) -> u64 {
    times
        .windows(2)
        .filter(|w| w[1] > window.0 && w[0] < window.1)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's files: producer acks `(value, partition, offset, ms)`, one consumer's
    /// records `(value, partition, offset)` consumed at 1 000, and committed samples.
    fn run(
        acks: &[(&str, i32, i64, u64)],
        given: &[(&str, i32, i64)],
        samples: &str,
    ) -> (tempfile::TempDir, Files) {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = Files(dir.path().to_path_buf());
        let producer: String = acks
            .iter()
            .map(|(v, p, o, ms)| {
                format!(
                    "{{\"timestamp\":{ms},\"name\":\"producer_send_success\",\"value\":\"{v}\",\
                     \"partition\":{p},\"offset\":{o}}}\n"
                )
            })
            .collect();
        let mut consumer: String = given
            .iter()
            .map(|(v, p, o)| {
                format!(
                    "{{\"timestamp\":1,\"name\":\"record_data\",\"value\":\"{v}\",\
                     \"partition\":{p},\"offset\":{o}}}\n"
                )
            })
            .collect();
        consumer.push_str("{\"timestamp\":1000,\"name\":\"records_consumed\",\"count\":1}\n");
        std::fs::write(files.producer(), producer).expect("write");
        std::fs::write(files.consumer(0), consumer).expect("write");
        std::fs::write(files.commits(), samples).expect("write");
        (dir, files)
    }

    const ACKS: [(&str, i32, i64, u64); 3] = [("0", 0, 0, 10), ("1", 0, 1, 20), ("2", 1, 0, 30)];

    #[test]
    fn a_faithful_log_passes() {
        let (_dir, files) = run(&ACKS, &[("1", 0, 1)], "5 0 1\n6 0 2\n");
        let verdict = check(&files, 1, "0 0 0\n0 1 1\n1 0 2\n", &[]);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
        assert!(verdict.figures.contains("records acknowledged: 3"));
    }

    #[test]
    fn an_acknowledgement_without_an_offset_needs_its_value_on_its_partition() {
        // "1" acknowledged with offset -1 (DUPLICATE_SEQUENCE_NUMBER): stored on its
        // partition passes; missing, or on another partition, is a loss.
        let acks = [("0", 0, 0, 10), ("1", 0, -1, 20), ("2", 1, 0, 30)];
        let (_dir, files) = run(&acks, &[], "");
        let verdict = check(&files, 1, "0 0 0\n0 1 1\n1 0 2\n", &[]);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
        for log in ["0 0 0\n1 0 2\n", "0 0 0\n1 0 2\n1 1 1\n"] {
            let verdict = check(&files, 1, log, &[]);
            assert!(
                verdict
                    .violations
                    .iter()
                    .any(|v| v.contains("acknowledged \"1\" at 0:-1")),
                "{log:?}: {:?}",
                verdict.violations
            );
        }
    }

    #[test]
    fn every_kind_of_loss_is_reported() {
        let (_dir, files) = run(&ACKS, &[("9", 0, 1)], "5 0 2\n6 0 1\n");
        // Value 1 lost (a hole at offset 1), value 2 stored twice.
        let verdict = check(&files, 1, "0 0 0\n0 2 2\n1 0 2\n", &[]);
        let all = verdict.violations.join("\n");
        for expected in [
            "offset 2 follows 0",
            "stored twice",
            "acknowledged \"1\" at 0:1",
            "consumer 0 was given \"9\"",
            "committed offset went back from 2",
        ] {
            assert!(all.contains(expected), "{expected:?} not in:\n{all}");
        }
    }

    #[test]
    fn a_client_that_never_recovers_is_reported() {
        let (_dir, files) = run(&ACKS, &[], "");
        let fault = Event {
            fault: "pause",
            host: Some(1),
            partitions: vec![0],
            start_ms: 12,
            heal_ms: 15,
            note: String::new(),
        };
        let verdict = check(
            &files,
            1,
            "0 0 0\n0 1 1\n1 0 2\n",
            std::slice::from_ref(&fault),
        );
        let all = verdict.violations.join("\n");
        // Partition 1 acknowledged after the heal; partition 0 did too (at 20); the
        // consumer consumed at 1 000, within its bound: only a later fault fails.
        assert!(all.is_empty(), "{all}");
        let late = Event {
            heal_ms: 100_000,
            ..fault
        };
        let verdict = check(&files, 1, "0 0 0\n0 1 1\n1 0 2\n", &[late]);
        let all = verdict.violations.join("\n");
        assert!(all.contains("partition 0 acknowledged nothing"), "{all}");
        assert!(all.contains("consumer 0 consumed nothing"), "{all}");
    }
}
