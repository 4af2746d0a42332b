//! A whole run: set-up, one pinned glommio executor per core running its streams and a
//! ticker, the main thread collecting reports, and the results written at the end.

use std::{
    cell::{Cell, RefCell},
    collections::BTreeMap,
    rc::Rc,
    sync::{atomic::AtomicBool, mpsc, Arc},
    time::{Duration, SystemTime},
};

use anyhow::{anyhow, Context};
use glommio::{LocalExecutorBuilder, Placement};
use kafka_protocol::{messages::TopicName, protocol::StrBytes};

use weir_client::{
    dialer::Dialer,
    metadata,
    sasl::{SaslLogin, SaslMechanism},
};

use crate::{
    broker_metrics,
    clock::now_ns,
    consumer::{self, ConsumerConfig, FetchStream},
    control::Control,
    group::{self, Membership, Positions, SessionStats},
    options::{StartAt, Workload},
    plan,
    producer::{self, Identity, ProduceStream, ProducerConfig, TxnPlan},
    report::{self, CoreReport},
    results::{percentile_distribution, GroupSummary, LatencySummary, Summary, Throughput},
    stats::{CoreStats, IntervalReport, Metric},
};

/// What a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Only produce.
    Produce,
    /// Only consume.
    Consume,
    /// Produce and consume, measuring end-to-end latency.
    EndToEnd,
}

impl Mode {
    /// The command's name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Produce => "produce",
            Mode::Consume => "consume",
            Mode::EndToEnd => "e2e",
        }
    }

    /// What the mode measures; transactional producers add their commits and begins.
    fn metrics(self, transactional: bool) -> Vec<Metric> {
        let mut metrics = match self {
            Mode::Produce => vec![Metric::Produce],
            Mode::Consume => vec![Metric::Fetch],
            Mode::EndToEnd => vec![Metric::Produce, Metric::EndToEnd, Metric::Fetch],
        };
        if transactional && self != Mode::Consume {
            metrics.extend([Metric::Commit, Metric::Begin]);
        }
        metrics
    }
}

/// How a run ended.
pub enum Outcome {
    /// It ran to its end.
    Completed,
    /// It was aborted; the results gathered so far were written.
    Aborted(String),
}

/// The SASL login `--sasl-user` (`user`) and `--sasl-mechanism` ask for, if any.
pub fn sasl_login_from(user: Option<&str>, mechanism: &str) -> anyhow::Result<Option<SaslLogin>> {
    let Some(text) = user else {
        return Ok(None);
    };
    let mechanism = SaslMechanism::from_name(mechanism).ok_or_else(|| {
        anyhow!("--sasl-mechanism {mechanism:?}: not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    })?;
    let login = SaslLogin::parse(mechanism, text).map_err(|e| anyhow!("--sasl-user: {e}"))?;
    Ok(Some(login))
}

/// Runs `workload` in `mode`, printing progress and writing the results into its `out`.
pub fn run(mode: Mode, workload: &Workload) -> anyhow::Result<Outcome> {
    workload.validate().map_err(|e| anyhow!(e))?;
    if mode == Mode::Produce && workload.group.is_some() {
        return Err(anyhow!(
            "--group is for consumers: use it with consume or e2e"
        ));
    }
    std::fs::create_dir_all(&workload.out)
        .with_context(|| format!("creating {}", workload.out.display()))?;
    let started_at = SystemTime::now();
    let dialer = match &workload.tls_ca {
        Some(ca) => Dialer::tls(ca).context("setting up TLS")?,
        None => Dialer::plaintext(),
    };
    let dialer = dialer.with_sasl(sasl_login_from(
        workload.sasl_user.as_deref(),
        &workload.sasl_mechanism,
    )?);

    let (topology, start_offsets, membership) = set_up(mode, workload, &dialer)?;
    let broker_scrape = workload
        .broker_metrics
        .clone()
        .map(|url| broker_metrics::Scraper::start(url, workload.warmup));
    let produces = match mode {
        Mode::Consume => Vec::new(),
        _ => plan::produce_streams(
            &topology,
            workload.producers as usize,
            workload.rate,
            workload.messages,
        ),
    };
    let fetches = match mode {
        Mode::Produce => Vec::new(),
        _ => {
            // A group member reads only what the group assigned it.
            let mut assigned = topology.clone();
            if let Some(m) = &membership {
                assigned.leaders.retain(|p, _| m.partitions.contains(p));
            }
            plan::fetch_streams(&assigned, workload.consumers as usize, &start_offsets)
        }
    };
    let positions = membership.as_ref().map(|_| {
        let partitions = topology.leaders.keys().max().map_or(0, |&p| p as usize + 1);
        Arc::new(Positions::new(partitions, &start_offsets))
    });
    let cores: Vec<Option<usize>> = match &workload.cores {
        Some(list) => list.0.iter().map(|&c| Some(c)).collect(),
        None => vec![None],
    };

    let warmup = Duration::from_secs(workload.warmup.as_secs_f64().ceil() as u64);
    let start_ns = now_ns();
    let end_ns = workload
        .duration
        .map(|d| start_ns + (warmup + d).as_nanos() as u64);
    let control = Arc::new(Control::new(start_ns, end_ns, produces.len()));
    let (tx, rx) = mpsc::channel::<CoreReport>();
    let topic = TopicName(StrBytes::from_string(topology.topic.clone()));
    let producer_config = ProducerConfig {
        topic: topic.clone(),
        acks: workload.acks,
        message_bytes: workload.message_size as usize,
        keys: workload.keys,
        batch_bytes: workload.batch_bytes as usize,
        linger_ns: workload.linger.as_nanos() as u64,
        max_in_flight: u64::from(workload.max_in_flight),
        buffer_bytes: workload.buffer_bytes,
        dialer: dialer.clone(),
        identity: if workload.transactional {
            Identity::Transactional(TxnPlan {
                size: workload.transaction_size,
                abort_ratio: workload.abort_ratio,
                v1_only: workload.transactions_v1,
            })
        } else if workload.idempotent {
            Identity::Idempotent
        } else {
            Identity::Plain
        },
    };
    let end_to_end = mode == Mode::EndToEnd;
    let consumer_config = ConsumerConfig {
        topic,
        partition_bytes_max: i32::try_from(workload.fetch_bytes).unwrap_or(i32::MAX),
        wait_ms_max: i32::try_from(workload.fetch_wait.as_millis()).unwrap_or(i32::MAX),
        max_in_flight: workload.max_in_flight as usize,
        end_to_end,
        messages: if end_to_end { None } else { workload.messages },
        positions: positions.clone(),
        dialer,
        read_committed: workload.read_committed,
    };
    let mut handles = Vec::new();
    let core_count = cores.len();
    for ((index, core), (produces, fetches)) in cores.iter().enumerate().zip(
        plan::deal(produces, core_count)
            .into_iter()
            .zip(plan::deal(fetches, core_count)),
    ) {
        let placement = match core {
            Some(core) => Placement::Fixed(*core),
            None => Placement::Unbound,
        };
        let control = control.clone();
        let tx = tx.clone();
        let producer_config = producer_config.clone();
        let consumer_config = consumer_config.clone();
        let handle = LocalExecutorBuilder::new(placement)
            .name(&format!("loadgen-{index}"))
            .spin_before_park(workload.spin)
            .spawn(move || {
                core_main(
                    index,
                    produces,
                    fetches,
                    producer_config,
                    consumer_config,
                    control,
                    tx,
                )
            })
            .map_err(|e| anyhow!("starting the executor on core {core:?}: {e}"))?;
        handles.push(handle);
    }
    drop(tx);
    let session = match (&membership, &positions) {
        (Some(m), Some(p)) => Some(start_session(
            m.clone(),
            workload,
            p.clone(),
            control.clone(),
            cores[0],
        )?),
        _ => None,
    };
    let totals = report::collect(
        rx,
        core_count,
        &mode.metrics(workload.transactional),
        &workload.out,
        start_ns,
        warmup,
        started_at,
    )
    .context("writing the interval logs")?;
    for handle in handles {
        handle
            .join()
            .map_err(|e| anyhow!("a loadgen executor failed: {e}"))?;
    }

    let group = match (session, membership) {
        (Some(session), Some(m)) => Some(session.finish(m)?),
        _ => None,
    };
    if mode == Mode::EndToEnd && !control.aborted() {
        let missing = control.acknowledged().saturating_sub(control.consumed());
        if missing > 0 {
            control.note_error("acknowledged but not consumed", missing);
        }
    }
    // The broker's histograms: a failed scrape is an error of the run, not its end.
    let broker_histograms = match broker_scrape.map(broker_metrics::Scraper::finish) {
        Some(Ok(histograms)) => histograms,
        Some(Err(e)) => {
            control.note_error(&format!("broker metrics: {e}"), 1);
            Vec::new()
        }
        None => Vec::new(),
    };
    let error_kinds = control.error_kinds();
    let errors = error_kinds.values().sum::<u64>();
    let seconds = totals.measured_seconds.max(1e-9);
    let throughput = |messages: u64, bytes: u64| Throughput {
        messages,
        messages_per_second: messages as f64 / seconds,
        megabytes_per_second: bytes as f64 / 1e6 / seconds,
    };
    let mut latency_ms = std::collections::BTreeMap::new();
    for (metric, histogram) in &totals.histograms {
        std::fs::write(
            workload.out.join(format!("{}.hgrm", metric.name())),
            percentile_distribution(histogram),
        )
        .context("writing the percentile distribution")?;
        latency_ms.insert(metric.name().to_string(), LatencySummary::of(histogram));
    }
    for (name, buckets) in broker_histograms {
        std::fs::write(
            workload.out.join(format!("{name}.hgrm")),
            buckets.distribution(),
        )
        .context("writing the broker's distribution")?;
        latency_ms.insert(name.to_string(), buckets.summary());
    }
    let c = &totals.counters;
    let summary = Summary {
        label: workload.label_or(mode.name()),
        command: mode.name().to_string(),
        bootstrap: workload.bootstrap.clone(),
        profile: workload.profile.clone(),
        options: serde_json::to_value(workload).context("encoding the options")?,
        started_at_unix_s: started_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        measured_seconds: totals.measured_seconds,
        produce: (mode != Mode::Consume).then(|| throughput(c.produced_messages, c.produced_bytes)),
        consume: (mode != Mode::Produce).then(|| throughput(c.consumed_messages, c.consumed_bytes)),
        errors: errors.max(totals.counters_all.errors),
        error_kinds,
        aborted: control.abort_reason(),
        group,
        latency_ms,
    };
    std::fs::write(
        workload.out.join("summary.json"),
        serde_json::to_string_pretty(&summary).context("encoding summary.json")?,
    )
    .context("writing summary.json")?;
    print_summary(&summary, workload);
    Ok(match summary.aborted {
        Some(reason) => Outcome::Aborted(reason),
        None => Outcome::Completed,
    })
}

/// The `--group` session's executor, and how to end it.
struct Session {
    stop: Arc<AtomicBool>,
    stats: Arc<SessionStats>,
    thread: glommio::ExecutorJoinHandle<()>,
}

impl Session {
    /// Makes the last commit, leaves the group and reports.
    fn finish(self, membership: Membership) -> anyhow::Result<GroupSummary> {
        use std::sync::atomic::Ordering;
        self.stop.store(true, Ordering::Release);
        self.thread
            .join()
            .map_err(|e| anyhow!("the group session's executor failed: {e}"))?;
        Ok(GroupSummary {
            name: membership.group,
            member_id: membership.member_id,
            generation: membership.generation,
            partitions: membership.partitions,
            commits: self.stats.commits.load(Ordering::Relaxed),
            commit_ms_max: self.stats.commit_ns_max.load(Ordering::Relaxed) as f64 / 1e6,
        })
    }
}

/// Starts the heartbeat-and-commit session of a `--group` member on `core`.
fn start_session(
    membership: Membership,
    workload: &Workload,
    positions: Arc<Positions>,
    control: Arc<Control>,
    core: Option<usize>,
) -> anyhow::Result<Session> {
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(SessionStats::default());
    let topic = workload.topic.clone();
    let interval = workload.commit_interval;
    let (task_stop, task_stats) = (stop.clone(), stats.clone());
    let thread = LocalExecutorBuilder::new(core.map_or(Placement::Unbound, Placement::Fixed))
        .name("loadgen-group")
        .spawn(move || {
            group::session(
                membership, topic, positions, interval, control, task_stop, task_stats,
            )
        })
        .map_err(|e| anyhow!("starting the group session's executor: {e}"))?;
    Ok(Session {
        stop,
        stats,
        thread,
    })
}

type SetUp = (metadata::Topology, BTreeMap<i32, i64>, Option<Membership>);

fn set_up(mode: Mode, workload: &Workload, dialer: &Dialer) -> anyhow::Result<SetUp> {
    let dialer = dialer.clone();
    let bootstrap = workload.bootstrap.clone();
    let topic = workload.topic.clone();
    let partitions = workload.partitions;
    let latest = mode == Mode::EndToEnd || workload.from == StartAt::Latest;
    let consumes = mode != Mode::Produce;
    let group = workload.group.clone();
    // `e2e` measures from the end of the log; `consume` resumes where the group was.
    let resume = mode == Mode::Consume;
    LocalExecutorBuilder::new(Placement::Unbound)
        .name("loadgen-setup")
        .spawn(move || async move {
            let topology =
                metadata::discover(&dialer, &bootstrap, &topic, partitions, "loadgen").await?;
            let mut offsets = if consumes {
                metadata::offsets(&dialer, &topology, latest, "loadgen").await?
            } else {
                Default::default()
            };
            let membership = match group.filter(|_| consumes) {
                Some(group) => {
                    let all: Vec<i32> = topology.leaders.keys().copied().collect();
                    let m = group::join(&dialer, &bootstrap, &group, &topic, &all).await?;
                    offsets.retain(|p, _| m.partitions.contains(p));
                    if resume {
                        offsets.extend(group::committed(&m, &topic).await?);
                    }
                    Some(m)
                }
                None => None,
            };
            Ok::<_, anyhow::Error>((topology, offsets, membership))
        })
        .map_err(|e| anyhow!("starting the set-up executor: {e}"))?
        .join()
        .map_err(|e| anyhow!("set-up executor failed: {e}"))?
        .with_context(|| {
            format!(
                "setting up topic {} at {}",
                workload.topic, workload.bootstrap
            )
        })
}

async fn core_main(
    core: usize,
    produces: Vec<ProduceStream>,
    fetches: Vec<FetchStream>,
    producer_config: ProducerConfig,
    consumer_config: ConsumerConfig,
    control: Arc<Control>,
    reports: mpsc::Sender<CoreReport>,
) {
    let stats = Rc::new(RefCell::new(CoreStats::default()));
    let done = Rc::new(Cell::new(false));
    let ticker = glommio::spawn_local(tick(
        core,
        stats.clone(),
        control.clone(),
        reports,
        done.clone(),
    ));
    let producer_config = Rc::new(producer_config);
    let consumer_config = Rc::new(consumer_config);
    let mut tasks = Vec::new();
    for stream in fetches {
        tasks.push(glommio::spawn_local(consumer::run(
            stream,
            consumer_config.clone(),
            control.clone(),
            stats.clone(),
        )));
    }
    for stream in produces {
        tasks.push(glommio::spawn_local(producer::run(
            stream,
            producer_config.clone(),
            control.clone(),
            stats.clone(),
        )));
    }
    for task in tasks {
        task.await;
    }
    done.set(true);
    ticker.await;
}

/// Sends this core's measurements once per second, aligned on the run's start, and a
/// last report when the core's streams are done.
async fn tick(
    core: usize,
    stats: Rc<RefCell<CoreStats>>,
    control: Arc<Control>,
    reports: mpsc::Sender<CoreReport>,
    done: Rc<Cell<bool>>,
) {
    const SECOND_NS: u64 = 1_000_000_000;
    for tick in 1u64.. {
        let boundary_ns = control.start_ns + tick * SECOND_NS;
        loop {
            let now = now_ns();
            if now >= boundary_ns || done.get() {
                break;
            }
            glommio::timer::sleep(Duration::from_nanos((boundary_ns - now).min(50_000_000))).await;
        }
        let last = done.get();
        let (histograms, counters) = stats.borrow_mut().take();
        let report = IntervalReport {
            tick,
            end_ns: if last {
                now_ns().min(boundary_ns)
            } else {
                boundary_ns
            },
            histograms,
            counters,
            last,
        };
        if reports.send((core, report)).is_err() || last {
            return;
        }
    }
}

fn print_summary(summary: &Summary, workload: &Workload) {
    println!(
        "{} ({}): {:.1} s measured, {} errors",
        summary.label, summary.command, summary.measured_seconds, summary.errors
    );
    for (name, t) in [
        ("produced", &summary.produce),
        ("consumed", &summary.consume),
    ] {
        if let Some(t) = t {
            println!(
                "  {name}: {} messages, {:.0} msg/s, {:.1} MB/s",
                t.messages, t.messages_per_second, t.megabytes_per_second
            );
        }
    }
    for (metric, l) in &summary.latency_ms {
        println!(
            "  {metric} latency ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  p99.99 {:.3}  max {:.3}  ({} values)",
            l.p50, l.p90, l.p99, l.p99_9, l.p99_99, l.max, l.count
        );
    }
    if let Some(g) = &summary.group {
        println!(
            "  group {}: member {} (generation {}), partitions {:?}, {} commits, slowest {:.3} ms",
            g.name, g.member_id, g.generation, g.partitions, g.commits, g.commit_ms_max
        );
    }
    for (kind, count) in &summary.error_kinds {
        println!("  error {kind}: {count}");
    }
    println!("  results in {}", workload.out.display());
}
