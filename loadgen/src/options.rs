//! The workload options shared by `produce`, `consume` and `e2e`, parsed and validated.

use std::{path::PathBuf, time::Duration};

use clap::{Args, ValueEnum};
use serde::Serialize;
use weir_client::units::parse_duration;

/// What a run does and how hard it pushes.
#[derive(Args, Debug, Clone, Serialize)]
pub struct Workload {
    /// Any broker of the cluster, HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Speak TLS (Kafka's SSL protocol) to the brokers, trusting the CA certificates in
    /// this PEM file; --bootstrap is then a TLS listener.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Log in with SASL as NAME:PASSWORD on every connection (where the brokers require
    /// it). Never written to the results.
    #[arg(long, value_name = "NAME:PASSWORD")]
    #[serde(skip)]
    pub sasl_user: Option<String>,
    /// The SASL mechanism --sasl-user logs in with.
    #[arg(long, default_value = "SCRAM-SHA-512", value_name = "MECHANISM")]
    pub sasl_mechanism: String,
    /// Topic to use; created with --partitions if missing.
    #[arg(long, default_value = "loadgen")]
    pub topic: String,
    /// Partitions of the topic when loadgen creates it.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub partitions: u32,
    /// Producer clients (each has its own connections); partitions are split between them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub producers: u32,
    /// Consumer clients; partitions are split between them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub consumers: u32,
    /// Size of each message value in bytes (at least 16: send time and sequence number).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(16..=16 << 20))]
    pub message_size: u32,
    /// Give every message a key, one of this many (8 bytes, big-endian, the message's
    /// index modulo N), as a compacted topic needs. [default: no key]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub keys: Option<u64>,
    /// A partition's batch is sent when it reaches this many bytes.
    #[arg(long, default_value_t = 16384, value_parser = clap::value_parser!(u32).range(64..=64 << 20))]
    pub batch_bytes: u32,
    /// How long a batch may wait for more messages before it is sent (0 = send as soon
    /// as a request slot is free).
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    #[serde(serialize_with = "as_seconds")]
    pub linger: Duration,
    /// Acknowledgement the producers ask for.
    #[arg(long, value_enum, default_value_t = Acks::All)]
    pub acks: Acks,
    /// Target messages per second over all producers on a fixed schedule; latency counts
    /// from each message's scheduled send time. 0 = as fast as possible (open throttle).
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// How long to measure, after the warm-up (e.g. 30s, 2m).
    #[arg(long, value_parser = parse_duration, conflicts_with = "messages")]
    #[serde(serialize_with = "as_seconds_opt")]
    pub duration: Option<Duration>,
    /// Stop after this many messages per run instead of after a duration.
    #[arg(long)]
    pub messages: Option<u64>,
    /// Time at the start whose measurements are left out of the results.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    #[serde(serialize_with = "as_seconds")]
    pub warmup: Duration,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_in_flight: u32,
    /// Producers take a producer id and number their batches, so the broker stores a
    /// retried batch once (Kafka's enable.idempotence).
    #[arg(long)]
    pub idempotent: bool,
    /// Producers write in transactions: each producer stream is a transactional
    /// producer with its own transactional id, committing every --transaction-size
    /// messages; each EndTxn's latency is measured as `commit`. Implies --idempotent.
    #[arg(long)]
    pub transactional: bool,
    /// Messages per transaction of each producer stream (with --transactional).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub transaction_size: u64,
    /// Fraction of transactions aborted instead of committed, spread evenly (with
    /// --transactional).
    #[arg(long, default_value_t = 0.0)]
    pub abort_ratio: f64,
    /// Transactions speak V1 (an AddPartitionsToTxn opens each, one producer epoch for
    /// all) even where the broker finalizes `transaction.version` 2, as clients before
    /// Kafka 4.0 and librdkafka do; without it, V2 wherever the broker offers it, as
    /// Kafka's 4.x producer does (with --transactional).
    #[arg(long)]
    pub transactions_v1: bool,
    /// Consumers read only committed records (isolation level READ_COMMITTED), dropping
    /// aborted transactions' records as Kafka's consumer does.
    #[arg(long)]
    pub read_committed: bool,
    /// Bytes a producer connection may hold in unsent batches; beyond it, messages wait
    /// (their latency still counts from their scheduled time).
    #[arg(long, default_value_t = 32 << 20)]
    pub buffer_bytes: u64,
    /// Bytes a fetch asks for per partition.
    #[arg(long, default_value_t = 1 << 20)]
    pub fetch_bytes: u32,
    /// How long a fetch may wait at the broker for data.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    #[serde(serialize_with = "as_seconds")]
    pub fetch_wait: Duration,
    /// Where `consume` starts reading (`e2e` always starts at the end); with --group,
    /// where partitions without a committed offset start.
    #[arg(long, value_enum, default_value_t = StartAt::Earliest)]
    pub from: StartAt,
    /// Consumer group the consumers read as, one member of it: the partitions are the
    /// ones the group assigns, `consume` starts from the committed offsets, and the
    /// positions reached are committed every --commit-interval. Without it, consumers
    /// are assigned partitions directly and commit nothing.
    #[arg(long)]
    pub group: Option<String>,
    /// How often a --group member heartbeats and commits the positions it reached.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    #[serde(serialize_with = "as_seconds")]
    pub commit_interval: Duration,
    /// Directory for the histogram logs, percentile distributions and summary.json.
    #[arg(long, default_value = "loadgen-results")]
    pub out: PathBuf,
    /// Name of this run in summaries and comparisons (default: the command name).
    #[arg(long)]
    pub label: Option<String>,
    /// Name of the broker configuration under test, recorded in summary.json.
    #[arg(long)]
    pub profile: Option<String>,
    /// The broker's Prometheus endpoint (weir: http://HOST:9644/metrics): its
    /// group-commit and fdatasync histograms over the measured part of the run are kept
    /// beside the client's (broker-flush-round.hgrm, broker-flush-sync.hgrm).
    #[arg(long, value_name = "URL")]
    pub broker_metrics: Option<String>,
    /// How long an idle loadgen thread polls before it sleeps in the kernel: waking a
    /// sleeping core costs tens of microseconds (on a VM sometimes milliseconds), which
    /// would be measured as broker latency.
    #[arg(long, default_value = "100us", value_parser = parse_duration)]
    #[serde(serialize_with = "as_seconds")]
    pub spin: Duration,
    /// CPU cores to run on, one pinned thread each (e.g. 0 or 0,2-3); default: one
    /// unpinned thread.
    #[arg(long, value_parser = parse_cores)]
    pub cores: Option<CoreList>,
}

/// The produce acknowledgement mode.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Acks {
    /// No response (latency ends when the request is written).
    #[value(name = "0")]
    #[serde(rename = "0")]
    None,
    /// The leader has the batch.
    #[value(name = "1")]
    #[serde(rename = "1")]
    Leader,
    /// Every in-sync replica has the batch (on weir: it is durable).
    #[value(name = "all")]
    #[serde(rename = "all")]
    All,
}

impl Acks {
    /// The value of the Produce request's acks field.
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// Where a consumer starts.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StartAt {
    /// The log start offset.
    Earliest,
    /// The log end offset when the run starts.
    Latest,
}

/// A validated, non-empty list of CPU cores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoreList(pub Vec<usize>);

impl Workload {
    /// The label of this run, given the command's name.
    pub fn label_or(&self, command: &str) -> String {
        self.label.clone().unwrap_or_else(|| command.to_string())
    }

    /// Checks the combinations clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.rate >= 0.0 && self.rate.is_finite()) {
            return Err(format!(
                "--rate {} must be 0 or a positive number",
                self.rate
            ));
        }
        if self.duration.is_none() && self.messages.is_none() {
            return Err("give --duration or --messages".into());
        }
        if self.duration == Some(Duration::ZERO) || self.messages == Some(0) {
            return Err("--duration and --messages must be more than 0".into());
        }
        if !(0.0..=1.0).contains(&self.abort_ratio) {
            return Err(format!(
                "--abort-ratio {} must be within 0..=1",
                self.abort_ratio
            ));
        }
        if self.transactional && self.acks != Acks::All {
            return Err("--transactional needs --acks all".into());
        }
        if self.group.is_some() && self.commit_interval.is_zero() {
            return Err("--commit-interval must be more than 0".into());
        }
        Ok(())
    }
}

/// Parses `0`, `0,2`, `1-3` into a sorted core list without repeats (the shared parser,
/// `weir_client::units::parse_cores`, keeps the order written; loadgen's list is a set).
pub fn parse_cores(text: &str) -> Result<CoreList, String> {
    let mut cores = weir_client::units::parse_cores(text).map_err(|e| e.to_string())?;
    cores.sort_unstable();
    cores.dedup();
    if cores.is_empty() {
        return Err("no cores given".into());
    }
    Ok(CoreList(cores))
}

fn as_seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn as_seconds_opt<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_parse_lists_and_ranges() {
        assert_eq!(parse_cores("0"), Ok(CoreList(vec![0])));
        assert_eq!(parse_cores("3,0-1,1"), Ok(CoreList(vec![0, 1, 3])));
        assert!(parse_cores("2-1").is_err());
        assert!(parse_cores("a").is_err());
    }
}
