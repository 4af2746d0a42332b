//! `loadgen connect`: opens connections to one broker as fast as it can — TCP, then a
//! TLS handshake and a SASL login when asked, then one ApiVersions round trip — and
//! reports how many a second the broker completes and how long each took (from connect
//! to the ApiVersions answer). The figure behind "connections per second with full TLS
//! and SCRAM" on one shard.

use std::{cell::RefCell, path::PathBuf, rc::Rc, time::Duration};

use anyhow::{anyhow, Context};
use glommio::{LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use kafka_protocol::messages::ApiVersionsRequest;
use weir_client::{connection, dialer::Dialer, units::parse_duration};

use crate::{run::sasl_login_from, stats::latency_histogram};

/// What `loadgen connect` does.
#[derive(clap::Args, Debug, Clone)]
pub struct ConnectArgs {
    /// The broker (one shard's port), HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Speak TLS, trusting the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Log in with SASL as NAME:PASSWORD on every connection.
    #[arg(long, value_name = "NAME:PASSWORD")]
    pub sasl_user: Option<String>,
    /// The SASL mechanism --sasl-user logs in with.
    #[arg(long, default_value = "SCRAM-SHA-512", value_name = "MECHANISM")]
    pub sasl_mechanism: String,
    /// How long to keep connecting.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Stop after this many connections, even before --duration is up.
    #[arg(long)]
    pub connections: Option<u64>,
    /// Connections being opened at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub concurrency: u32,
    /// The core to run on (none: not pinned).
    #[arg(long)]
    pub core: Option<usize>,
}

/// What one run measured.
struct Tally {
    latency: Histogram<u64>,
    errors: u64,
    first_error: Option<String>,
}

/// Runs `loadgen connect`, printing one line of results and a JSON summary.
pub fn connect(args: &ConnectArgs) -> anyhow::Result<()> {
    let dialer = match &args.tls_ca {
        Some(ca) => Dialer::tls(ca).context("setting up TLS")?,
        None => Dialer::plaintext(),
    };
    let dialer = dialer.with_sasl(sasl_login_from(
        args.sasl_user.as_deref(),
        &args.sasl_mechanism,
    )?);
    let placement = match args.core {
        Some(core) => Placement::Fixed(core),
        None => Placement::Unbound,
    };
    let (addr, duration, concurrency) = (args.bootstrap.clone(), args.duration, args.concurrency);
    let limit = args.connections.unwrap_or(u64::MAX);
    let started = std::time::Instant::now();
    let tally = LocalExecutorBuilder::new(placement)
        .name("loadgen-connect")
        .spawn(move || async move { run(dialer, addr, duration, limit, concurrency).await })
        .map_err(|e| anyhow!("starting the executor: {e}"))?
        .join()
        .map_err(|e| anyhow!("the executor failed: {e}"))?;
    let done = tally.latency.len();
    let elapsed = started
        .elapsed()
        .min(duration)
        .max(Duration::from_millis(1));
    let per_second = done as f64 / elapsed.as_secs_f64();
    let ms = |q: f64| tally.latency.value_at_quantile(q) as f64 / 1e6;
    println!(
        "{done} connections in {:.1} s = {per_second:.0}/s; connect-to-answer p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; {} errors{}",
        elapsed.as_secs_f64(),
        ms(0.5),
        ms(0.99),
        tally.latency.max() as f64 / 1e6,
        tally.errors,
        tally.first_error.map_or(String::new(), |e| format!(" (first: {e})")),
    );
    println!(
        "{}",
        serde_json::json!({
            "connections": done,
            "per_second": per_second,
            "p50_ms": ms(0.5),
            "p99_ms": ms(0.99),
            "errors": tally.errors,
        })
    );
    if tally.errors > 0 {
        return Err(anyhow!("{} connections failed", tally.errors));
    }
    Ok(())
}

/// Longest one connection may take before it counts as an error.
const CONNECTION_TIME_MAX: Duration = Duration::from_secs(10);

async fn run(
    dialer: Dialer,
    addr: String,
    duration: Duration,
    limit: u64,
    concurrency: u32,
) -> Tally {
    let tally = Rc::new(RefCell::new(Tally {
        latency: latency_histogram(),
        errors: 0,
        first_error: None,
    }));
    let deadline = std::time::Instant::now() + duration;
    let started = Rc::new(std::cell::Cell::new(0u64));
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (dialer, addr, tally) = (dialer.clone(), addr.clone(), Rc::clone(&tally));
            let count = Rc::clone(&started);
            glommio::spawn_local(async move {
                while std::time::Instant::now() < deadline && count.get() < limit {
                    count.set(count.get() + 1);
                    let started = std::time::Instant::now();
                    let bounded = futures_lite::future::or(once(&dialer, &addr), async {
                        glommio::timer::sleep(CONNECTION_TIME_MAX).await;
                        Err(anyhow!("no answer within {CONNECTION_TIME_MAX:?}"))
                    });
                    match bounded.await {
                        Ok(()) => {
                            let ns = started.elapsed().as_nanos() as u64;
                            let _ = tally.borrow_mut().latency.record(ns.max(1_000));
                        }
                        Err(e) => {
                            let mut t = tally.borrow_mut();
                            t.errors += 1;
                            t.first_error.get_or_insert(e.to_string());
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await;
    }
    Rc::try_unwrap(tally)
        .map(RefCell::into_inner)
        .unwrap_or_else(|_| unreachable!("every worker has finished"))
}

/// One connection: connect (TLS, login), one ApiVersions round trip, close.
async fn once(dialer: &Dialer, addr: &str) -> anyhow::Result<()> {
    let (mut writer, mut reader) = connection::connect_with(dialer, addr, "loadgen").await?;
    connection::call(&mut writer, &mut reader, &ApiVersionsRequest::default(), 3).await?;
    Ok(())
}
