//! loadgen — drives any Kafka-compatible broker and records what it measured.
//!
//! `produce`, `consume` and `e2e` run a workload (thread-per-core on glommio, one
//! connection per client and partition leader, several requests in flight per
//! connection) and write HdrHistogram interval logs, percentile distributions and
//! `summary.json` into `--out`; `compare` lays recorded runs side by side; `connect`
//! measures how many connections (with TLS and a SASL login) a broker completes a second.
//!
//! Modules: `options` (the workload), `plan` and `assign` (who does what), `producer` /
//! `consumer` (the streams), `payload` (what a message value carries), `group`
//! (consumer-group membership), `stats` / `report` / `results` (measuring and writing),
//! `compare`, `run` (the whole run), `control` (state shared by cores), `broker_metrics`
//! (the broker's own histograms, scraped from its Prometheus endpoint). The Kafka wire —
//! connections, framing, record batches, metadata discovery — is the `weir_client` crate.

mod accumulator;
mod assign;
mod broker_metrics;
mod clock;
mod compare;
mod connect;
mod consumer;
mod control;
mod group;
mod options;
mod payload;
mod plan;
mod producer;
mod report;
mod results;
mod run;
mod stats;
mod txn;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Load generator for Kafka-compatible brokers, with latency histograms.
#[derive(Parser)]
#[command(name = "loadgen", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Produce messages and measure acknowledgement latency and throughput.
    Produce(options::Workload),
    /// Consume messages and measure fetch latency and throughput.
    Consume(options::Workload),
    /// Produce and consume together; measures end-to-end latency from each message's
    /// send time (carried in the record) to its receipt.
    E2e(options::Workload),
    /// Compare recorded runs: a table with ratios to the first run and an SVG plot.
    Compare(compare::CompareArgs),
    /// Open connections (TCP, TLS, SASL login, one ApiVersions) as fast as possible and
    /// report connections per second and their latency.
    Connect(connect::ConnectArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (mode, workload) = match cli.command {
        Command::Compare(args) => {
            return match compare::compare(&args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("loadgen compare: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Connect(args) => {
            return match connect::connect(&args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("loadgen connect: {e:#}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Produce(w) => (run::Mode::Produce, w),
        Command::Consume(w) => (run::Mode::Consume, w),
        Command::E2e(w) => (run::Mode::EndToEnd, w),
    };
    match run::run(mode, &workload) {
        Ok(run::Outcome::Completed) => ExitCode::SUCCESS,
        Ok(run::Outcome::Aborted(reason)) => {
            eprintln!("loadgen {}: run ended early: {reason}", mode.name());
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("loadgen {}: {e:#}", mode.name());
            ExitCode::FAILURE
        }
    }
}
