//! Soak: the real broker under a steady load for a long time. loadgen first measures the
//! maximum durable throughput with a consumer group keeping up (e2e, acks=all, open
//! throttle), then runs at 70% of it with the group committing every second while the
//! broker's RSS is sampled every second. Checked: no errors, every message consumed,
//! the rate held, memory flat after the warm-up (no window's mean RSS more than 5% above
//! the first window's), and no one-second window's p99.9 latency (end-to-end and
//! produce) above three times the run's median one-second p99.9. It also reports the
//! bytes the data directory's device wrote per byte produced, what it trimmed and how many
//! cache flushes it did (`/proc/diskstats`). A short run — a debug build on a
//! shared CI machine — runs at 50% and asserts only what does not depend on the
//! machine's other load: no errors, nothing lost, memory growth under 20% (a leak of
//! 1 MiB/s would show as +30%). Its rate and latency (p99 of the first and last fifth)
//! are measured and reported, never asserted: a neighbour's burst would fail the run
//! with nothing wrong in the broker.
//!
//! The test command runs it for 60 s (`WEIR_SOAK_SECONDS`); the soak of docs/guarantees.md is
//! the long version, on an idle machine:
//! `cargo build --release --workspace && WEIR_SOAK_SECONDS=600 cargo test --release
//! --test soak -- --nocapture`. Long runs (5 minutes or more) leave out the first two
//! minutes for memory and compare the first and last minute for latency. Short runs
//! leave out the first half for memory, compare the first and last fifth for latency,
//! and scale the broker's data down (16 MiB segments, 64 MiB retention, a 32 MiB batch
//! cache) so it reaches its working size in time.
//! `WEIR_SOAK_RATE=N` soaks at N msgs/s instead of a share of the maximum;
//! `WEIR_SOAK_ARGS="--flag value …"` adds broker flags, `WEIR_SOAK_LOADGEN_ARGS` loadgen
//! flags (to both the maximum and the soak).
//! Results, including `soak.svg` (RSS and p99.9 over time), `seconds.csv` (each
//! second's p99.9, p50 and whether it lies within a second of a device stall), loadgen's
//! histogram logs, the broker's log (slow flush rounds are warnings there) and
//! `commits.csv` (its group commit, sampled every second from its metrics), go to
//! `WEIR_SOAK_OUT` (default `target/soak-runs/<unix time>`); loadgen prints a progress
//! line every second.

#[path = "soak/commit_sampler.rs"]
mod commit_sampler;
#[allow(dead_code)]
mod common;
#[path = "soak/diskstats.rs"]
mod diskstats;

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use common::{
    broker::{free_port, Broker},
    env_or,
    loadgen::{hlog_intervals, loadgen, summary},
    rss::RssSampler,
    scratch_dir,
};
use hdrhistogram::Histogram;

/// The soak's share of the measured maximum (issue 6's soak: 70%).
const LOAD_SHARE: f64 = 0.7;

/// A short run's share: a debug build near 70% of its maximum is close to saturation,
/// where any hiccup of a shared machine queues up.
const SHORT_LOAD_SHARE: f64 = 0.5;

/// Runs loadgen e2e on topic `soak` with its output on this terminal; returns the summary.
fn e2e(broker: &Broker, out: &Path, core: usize, args: &[&str]) -> serde_json::Value {
    // `WEIR_SOAK_LOADGEN_ARGS` adds loadgen flags to both runs (space-separated).
    let client = std::env::var("WEIR_SOAK_LOADGEN_ARGS").unwrap_or_default();
    let status = Command::new(loadgen())
        .args(["e2e", "--bootstrap", &broker.bootstrap(), "--topic", "soak"])
        .args(["--partitions", "4", "--message-size", "1024"])
        .args(["--cores", &core.to_string()])
        .arg("--out")
        .arg(out)
        .args(client.split_whitespace())
        .args(args)
        .status()
        .expect("run loadgen");
    assert!(
        status.success(),
        "loadgen {args:?} failed ({status}); broker log:\n{}",
        broker.log()
    );
    summary(out)
}

/// The `q` quantile in milliseconds of the intervals of `path` that start within
/// `window`.
fn quantile_ms(path: &Path, window: std::ops::Range<Duration>, q: f64) -> f64 {
    let mut merged: Histogram<u64> =
        Histogram::new_with_bounds(1_000, 3_600_000_000_000, 3).expect("histogram");
    for (start, h) in hlog_intervals(path) {
        if window.contains(&start) {
            merged.add(&h).expect("same bounds");
        }
    }
    merged.value_at_quantile(q) as f64 / 1e6
}

/// The `q` quantile in milliseconds per `step` of the run.
fn quantile_series(path: &Path, step: Duration, end: Duration, q: f64) -> Vec<(f64, f64)> {
    let steps = (end.as_nanos() / step.as_nanos().max(1)) as usize;
    let mut merged: Vec<Histogram<u64>> = (0..steps)
        .map(|_| Histogram::new_with_bounds(1_000, 3_600_000_000_000, 3).expect("histogram"))
        .collect();
    // One pass over the log: each interval goes to the step it starts in.
    for (start, h) in hlog_intervals(path) {
        let i = (start.as_nanos() / step.as_nanos().max(1)) as usize;
        if let Some(m) = merged.get_mut(i) {
            m.add(&h).expect("same bounds");
        }
    }
    merged
        .iter()
        .enumerate()
        .map(|(i, h)| {
            (
                (step * i as u32).as_secs_f64(),
                h.value_at_quantile(q) as f64 / 1e6,
            )
        })
        .collect()
}

/// One plotted line: its label, colour and (x, y) points.
type Series<'a> = (&'a str, &'a str, &'a [(f64, f64)]);

/// An SVG polyline panel: `series` scaled into the box at `top`.
fn panel(svg: &mut String, top: f64, title: &str, series: &[Series]) {
    let (left, width, height) = (70.0, 820.0, 230.0);
    let x_max = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let y_max = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .fold(1e-9, f64::max)
        * 1.1;
    let _ = write!(
        svg,
        r##"<text x="{left}" y="{}" font-size="15">{title}</text><rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#999"/>"##,
        top - 8.0
    );
    for tick in 0..=4 {
        let y = top + height - height * f64::from(tick) / 4.0;
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" font-size="11" text-anchor="end">{:.1}</text>"#,
            left - 6.0,
            y + 4.0,
            y_max * f64::from(tick) / 4.0
        );
        let x = left + width * f64::from(tick) / 4.0;
        let _ = write!(
            svg,
            r#"<text x="{x}" y="{}" font-size="11" text-anchor="middle">{:.0} s</text>"#,
            top + height + 14.0,
            x_max * f64::from(tick) / 4.0
        );
    }
    for (i, (label, colour, points)) in series.iter().enumerate() {
        let coords: Vec<String> = points
            .iter()
            .map(|(x, y)| {
                format!(
                    "{:.1},{:.1}",
                    left + width * x / x_max,
                    top + height - height * y / y_max
                )
            })
            .collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/><text x="{}" y="{}" font-size="12" fill="{colour}">{label}</text>"#,
            coords.join(" "),
            left + width - 320.0 + 170.0 * i as f64,
            top - 8.0
        );
    }
}

#[test]
fn a_soak_below_the_maximum_holds_memory_and_latency_steady() {
    let seconds: u64 = env_or("WEIR_SOAK_SECONDS", 60);
    let long = seconds >= 300;
    let out: PathBuf = std::env::var("WEIR_SOAK_OUT").map_or_else(
        |_| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("target/soak-runs/{now}"))
        },
        PathBuf::from,
    );
    std::fs::create_dir_all(&out).expect("output directory");
    // The broker and loadgen on different cores when there are two.
    let two_cores = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let (broker_core, loadgen_core) = if two_cores { (1, 0) } else { (0, 0) };
    let dir = scratch_dir();
    // Retention keeps the disk from filling (10 minutes at full speed is more than it
    // holds). A short run scales the broker's data down — segments, retention, batch
    // cache — so its memory reaches its working size within the warm-up, as a long
    // run's does within two minutes.
    // A long run is the dedicated-host soak: the default settings (shards poll before
    // sleeping), where the test suite's brokers run tuning/shared.toml.
    let data_settings: Vec<&str> = if long {
        vec![
            "--segment-bytes",
            "268435456",
            "--retention-bytes",
            "1073741824",
            "--cache-bytes",
            "268435456",
            "--spin-before-park",
            "500us",
        ]
    } else {
        vec![
            "--segment-bytes",
            "16777216",
            "--retention-bytes",
            "67108864",
            "--cache-bytes",
            "33554432",
        ]
    };
    // `WEIR_SOAK_ARGS` adds broker flags (space-separated), to soak other settings.
    let extra = std::env::var("WEIR_SOAK_ARGS").unwrap_or_default();
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut data_settings = data_settings;
    data_settings.extend(extra.split_whitespace());
    data_settings.extend(["--metrics-listen", &metrics]);
    let broker = Broker::start_on(&dir.path().join("data"), &[broker_core], &data_settings);
    let pid = broker.pid().expect("pid");

    // The maximum is what the broker sustains, not what an empty one bursts: a long run
    // measures 30 s after a 30 s warm-up, by which time segments have rolled and
    // retention deletes (a 20 s burst measured 154-186k msgs/s across runs, and 70% of
    // its top was too close to the sustained limit to be steady).
    let (max_warm_up, max_seconds) = if long { ("30s", "30s") } else { ("0s", "5s") };
    let max = e2e(
        &broker,
        &out.join("max"),
        loadgen_core,
        &[
            "--warmup",
            max_warm_up,
            "--duration",
            max_seconds,
            "--group",
            "soak-max",
        ],
    );
    let max_rate = max["produce"]["messages_per_second"]
        .as_f64()
        .expect("max rate");
    // `WEIR_SOAK_RATE` soaks at a given rate instead (to compare builds or settings at
    // one load); the maximum is still measured and reported.
    let share = if long { LOAD_SHARE } else { SHORT_LOAD_SHARE };
    let rate = std::env::var("WEIR_SOAK_RATE")
        .ok()
        .and_then(|r| r.parse::<f64>().ok())
        .unwrap_or((max_rate * share).floor());
    let share = rate / max_rate;
    println!("maximum durable e2e throughput {max_rate:.0} msgs/s; soaking at {rate:.0} msgs/s for {seconds} s");

    let sampler = RssSampler::start(pid, Duration::from_secs(1));
    let commits = commit_sampler::CommitSampler::start(metrics.clone());
    let device = diskstats::device_of(&broker.data_dir);
    let device_before = device.as_deref().and_then(diskstats::totals);
    let stall_sampler = device.clone().map(diskstats::StallSampler::start);
    let soak = e2e(
        &broker,
        &out.join("soak"),
        loadgen_core,
        &[
            "--rate",
            &rate.to_string(),
            "--duration",
            &format!("{seconds}s"),
            "--group",
            "soakers",
            "--commit-interval",
            "1s",
        ],
    );
    let rss = sampler.stop();
    let commits = commits.stop();
    std::fs::write(out.join("commits.csv"), &commits).expect("write commits.csv");
    let stalls = stall_sampler
        .map(diskstats::StallSampler::stop)
        .unwrap_or_default();
    let device_done = device_before
        .zip(device.as_deref().and_then(diskstats::totals))
        .map(|(before, after)| after.since(before));

    let run = Duration::from_secs(seconds);
    // Memory after the warm-up, window by window; latency of the first and last window
    // reported (p99.9 of a minute in a long run, p99 of a fifth in a short one).
    let (warm_up, window, growth_max, quantile) = if long {
        (
            Duration::from_secs(120),
            Duration::from_secs(60),
            0.05,
            0.999,
        )
    } else {
        (run / 2, run / 5, 0.20, 0.99)
    };
    let settled: Vec<u64> = rss
        .iter()
        .filter(|(t, _)| *t >= warm_up && *t <= run)
        .map(|(_, b)| *b)
        .collect();
    // Growth is a trend: RSS is compared window by window (a window's mean), because
    // the allocator gives freed pages back within seconds and one-second samples move
    // ±5% with the batch cache's mix of chunk sizes.
    let samples_per_window = (window.as_secs() as usize).max(1);
    let window_means: Vec<f64> = settled
        .chunks(samples_per_window)
        .filter(|w| w.len() * 2 >= samples_per_window)
        .map(|w| w.iter().sum::<u64>() as f64 / w.len() as f64)
        .collect();
    let baseline = *window_means
        .first()
        .expect("a window of RSS samples after the warm-up");
    let highest = window_means.iter().copied().fold(baseline, f64::max);
    let growth = highest / baseline - 1.0;
    let peak = settled.iter().copied().max().unwrap_or(0);
    let series = |metric: &str| out.join("soak").join(format!("{metric}.hlog"));
    let first = Duration::ZERO..window;
    let last = run.saturating_sub(window)..run + Duration::from_secs(1);
    let at = |metric: &str, window: &std::ops::Range<Duration>, q: f64| {
        quantile_ms(&series(metric), window.clone(), q)
    };
    let e2e_first = at("e2e", &first, 0.999);
    let e2e_last = at("e2e", &last, 0.999);
    let produce_first = at("produce", &first, 0.999);
    let produce_last = at("produce", &last, 0.999);
    let produced = soak["produce"]["messages"].as_u64().expect("produced");
    // Every one-second window's p99.9 against the run's median of them; the worst is
    // also taken over the windows a device stall did not touch (a second either side).
    let stalled = |second: f64| {
        stalls.iter().any(|st| {
            let (from, to) = (
                st.at.as_secs_f64() - 1.0,
                (st.at + st.length).as_secs_f64() + 1.0,
            );
            second + 1.0 > from && second < to
        })
    };
    let one_second =
        |metric: &str, q: f64| quantile_series(&series(metric), Duration::from_secs(1), run, q);
    let e2e_seconds = one_second("e2e", 0.999);
    let produce_seconds = one_second("produce", 0.999);
    let produce_p50_seconds = one_second("produce", 0.5);
    let per_second = |series: &[(f64, f64)]| -> (f64, f64, f64) {
        let outside = series
            .iter()
            .filter(|(t, _)| !stalled(*t))
            .map(|(_, v)| *v)
            .fold(0.0, f64::max);
        let mut p: Vec<f64> = series.iter().map(|(_, v)| *v).collect();
        p.sort_by(f64::total_cmp);
        (
            p.get(p.len() / 2).copied().unwrap_or(0.0),
            p.last().copied().unwrap_or(0.0),
            outside,
        )
    };
    let (e2e_median, e2e_worst, e2e_worst_unstalled) = per_second(&e2e_seconds);
    // Seconds behind the schedule: latency counts from each message's scheduled send,
    // so a median above 50 ms means the producer was tens of ms behind — a backlog,
    // whether the broker or the client's in-flight window held it (see docs/guarantees.md).
    let behind = produce_p50_seconds
        .iter()
        .filter(|(_, p50)| *p50 > 50.0)
        .count();
    let (produce_median, produce_worst, produce_worst_unstalled) = per_second(&produce_seconds);
    let produced_bytes = produced * 1024;
    let write_ratio = device_done.map(|d| d.written as f64 / produced_bytes as f64);
    let report = serde_json::json!({
        "seconds": seconds,
        "max_msgs_per_s": max_rate,
        "soak_rate_msgs_per_s": rate,
        "share_of_max": share,
        "achieved_msgs_per_s": soak["produce"]["messages_per_second"],
        "messages": produced,
        "errors": soak["errors"],
        "group_commits": soak["group"]["commits"],
        "rss_mib_first_window_after_warm_up": baseline / 1048576.0,
        "rss_mib_highest_window_after_warm_up": highest / 1048576.0,
        "rss_mib_window_means": window_means.iter().map(|m| m / 1048576.0).collect::<Vec<_>>(),
        "rss_growth": growth,
        "rss_mib_highest_sample_after_warm_up": peak as f64 / 1048576.0,
        "e2e_p999_ms_first_window": e2e_first,
        "e2e_p999_ms_last_window": e2e_last,
        "produce_p999_ms_first_window": produce_first,
        "produce_p999_ms_last_window": produce_last,
        "e2e_p999_ms_one_second_median": e2e_median,
        "e2e_p999_ms_one_second_worst": e2e_worst,
        "produce_p999_ms_one_second_median": produce_median,
        "produce_p999_ms_one_second_worst": produce_worst,
        "e2e_p999_ms_one_second_worst_without_device_stalls": e2e_worst_unstalled,
        "produce_p999_ms_one_second_worst_without_device_stalls": produce_worst_unstalled,
        "device_stalls": stalls.len(),
        "seconds_behind_schedule": behind,
        "fdatasync_ms_per_round": commit_sampler::mean_sync_ms(&commits),
        "device_stalls_s_and_ms": stalls
            .iter()
            .map(|st| (st.at.as_secs_f64(), st.length.as_millis()))
            .collect::<Vec<_>>(),
        "device": device,
        "device_bytes_written": device_done.map(|d| d.written),
        "device_bytes_discarded": device_done.map(|d| d.discarded),
        "device_flushes": device_done.map(|d| d.flushes),
        "device_bytes_per_produced_byte": write_ratio,
        "window_s": window.as_secs(),
        "warm_up_s": warm_up.as_secs(),
    });
    std::fs::write(
        out.join("soak.json"),
        serde_json::to_string_pretty(&report).expect("json"),
    )
    .expect("write soak.json");
    let mut csv = String::from("second,rss_bytes\n");
    for (t, b) in &rss {
        let _ = writeln!(csv, "{:.0},{b}", t.as_secs_f64());
    }
    std::fs::write(out.join("rss.csv"), csv).expect("write rss.csv");
    // Each second's latency and whether it lies within a second of a device stall (as
    // the worst "without device stalls" counts them), for plots that put runs side by
    // side (`benches/soak_compare.py`).
    let mut csv =
        String::from("second,e2e_p999_ms,produce_p999_ms,produce_p50_ms,near_device_stall\n");
    for ((e2e, produce), p50) in e2e_seconds
        .iter()
        .zip(&produce_seconds)
        .zip(&produce_p50_seconds)
    {
        let _ = writeln!(
            csv,
            "{:.0},{:.3},{:.3},{:.3},{}",
            e2e.0,
            e2e.1,
            produce.1,
            p50.1,
            u8::from(stalled(e2e.0))
        );
    }
    std::fs::write(out.join("seconds.csv"), csv).expect("write seconds.csv");
    // Slow flush rounds are logged by the broker, so a latency spike can be told apart
    // from the disk's.
    std::fs::write(out.join("broker.log"), broker.log()).expect("write broker.log");
    let step = if long {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(2)
    };
    let rss_mib: Vec<(f64, f64)> = rss
        .iter()
        .map(|(t, b)| (t.as_secs_f64(), *b as f64 / 1048576.0))
        .collect();
    let e2e_p999 = quantile_series(&series("e2e"), step, run, 0.999);
    let produce_p999 = quantile_series(&series("produce"), step, run, 0.999);
    let mut svg = String::from(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="920" height="620" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>"#,
    );
    panel(
        &mut svg,
        40.0,
        &format!(
            "broker RSS (MiB), soak at {rate:.0} msgs/s = {:.0}% of {max_rate:.0}",
            share * 100.0
        ),
        &[("RSS", "#1f77b4", &rss_mib)],
    );
    panel(
        &mut svg,
        350.0,
        &format!("p99.9 latency (ms) per {} s", step.as_secs()),
        &[
            ("end-to-end", "#d62728", &e2e_p999),
            ("produce (acks=all)", "#2ca02c", &produce_p999),
        ],
    );
    svg.push_str("</svg>\n");
    std::fs::write(out.join("soak.svg"), svg).expect("write soak.svg");
    println!(
        "soak: {}\nresults in {}",
        serde_json::to_string_pretty(&report).expect("json"),
        out.display()
    );

    assert_eq!(soak["errors"], 0, "{soak}");
    assert!(soak["aborted"].is_null(), "{soak}");
    assert_eq!(
        soak["consume"]["messages"].as_u64(),
        Some(produced),
        "the group kept up: {soak}"
    );
    // Rate and latency depend on the machine: asserted only in the long, hand-run soak.
    if long {
        assert!(
            produced as f64 >= rate * seconds as f64 * 0.95,
            "the rate was held: {produced} of {rate} msgs/s × {seconds} s"
        );
    }
    assert!(
        soak["group"]["commits"].as_u64().unwrap_or(0) >= seconds / 2,
        "{soak}"
    );
    assert!(
        growth < growth_max,
        "RSS grew {:.1}% after the warm-up (window means {:.1} → {:.1} MiB)",
        growth * 100.0,
        baseline / 1048576.0,
        highest / 1048576.0
    );
    for metric in ["e2e", "produce"] {
        let (first, last) = (at(metric, &first, quantile), at(metric, &last, quantile));
        println!(
            "{metric} p{}: {first:.2} ms in the first window, {last:.2} ms in the last",
            quantile * 100.0,
        );
    }
    // What must stay steady in the long run: no one-second window's p99.9 above three
    // times the run's median one-second p99.9.
    // The device's own stalls are reported beside it (the windows they did not touch).
    println!(
        "device stalls (no I/O completed for 100 ms or more): {} {:?}",
        stalls.len(),
        stalls
            .iter()
            .map(|st| format!("{:.0} s: {} ms", st.at.as_secs_f64(), st.length.as_millis()))
            .collect::<Vec<_>>()
    );
    for (metric, median, worst, unstalled) in [
        ("e2e", e2e_median, e2e_worst, e2e_worst_unstalled),
        (
            "produce",
            produce_median,
            produce_worst,
            produce_worst_unstalled,
        ),
    ] {
        let steady = worst <= 3.0 * median;
        println!(
            "{metric} one-second p99.9: median {median:.2} ms, worst {worst:.2} ms ({}), worst away from device stalls {unstalled:.2} ms",
            if steady { "steady" } else { "NOT steady" }
        );
        if long {
            assert!(
                steady,
                "{metric}: a one-second p99.9 of {worst:.2} ms, the median one {median:.2} ms"
            );
        }
    }
}
