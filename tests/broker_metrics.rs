//! The metrics endpoint of a real broker: what it counts agrees with what a client sent
//! and got back, its output parses with the Prometheus project's own parsers (the
//! `prometheus-client` Python package for both formats, and `promtool check metrics`),
//! and it answers only what it serves.

#[allow(dead_code)]
mod common;

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::Command,
    time::Duration,
};

use common::{
    broker::{free_port, http_exchange, Broker},
    interop::{python, script},
    kafka_client::{call, closed, connect, create, fetch, name, produce, produce_unacknowledged},
    run_with_input, scratch_dir,
};
use kafka_protocol::{
    messages::{
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        ApiVersionsRequest, GroupId, HeartbeatRequest, OffsetCommitRequest,
    },
    protocol::StrBytes,
};
use weir_client::record_batch::build_batch;

/// One HTTP exchange: the raw request, then everything the server sends until it closes.
fn exchange(port: u16, request: &[u8]) -> String {
    http_exchange(("127.0.0.1", port), request, Duration::from_secs(10))
        .expect("exchange with the metrics endpoint")
}

/// Status line and body of a GET.
fn get(port: u16, path: &str, accept: Option<&str>) -> (String, String) {
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    let answer = exchange(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: test\r\n{accept}\r\n").as_bytes(),
    );
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

/// Every sample of `text` as the Prometheus Python parser reads it.
fn parse(text: &str, format: &str) -> Vec<serde_json::Value> {
    let out = run_with_input(
        Command::new(python())
            .arg(script("parse_metrics.py"))
            .arg(format),
        Some(text.as_bytes()),
        "the metrics parser",
    );
    assert!(
        out.status.success(),
        "the {format} parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).expect("parser output")
}

/// The sum of the samples named `name` whose labels include all of `labels`.
fn sum(samples: &[serde_json::Value], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s["name"] == name)
        .filter(|s| labels.iter().all(|(k, v)| s["labels"][k] == *v))
        .map(|s| s["value"].as_f64().unwrap_or(0.0))
        .sum()
}

/// Every metric the example Grafana dashboard queries is one the broker serves, and the
/// example Prometheus config passes `promtool check config`.
fn dashboard_asks_only_for_served_metrics(exposition: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tuning/monitoring");
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("grafana-dashboard.json")).expect("dashboard"),
    )
    .expect("the dashboard is JSON");
    let mut asked = 0;
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            for (i, _) in expr.match_indices("weir_") {
                let name: String = expr[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    exposition.contains(&format!("\n{name}{{")),
                    "the dashboard asks for {name}, which the broker does not serve"
                );
                asked += 1;
            }
        }
    }
    assert!(asked >= 12);
    let out = Command::new("promtool")
        .args(["check", "config"])
        .arg(root.join("prometheus.yml"))
        .output()
        .expect("promtool is installed by tests/run-all.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn metrics_agree_with_what_clients_did_and_parse_with_prometheus_parsers() {
    let dir = scratch_dir();
    let metrics_port = free_port();
    let broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--metrics-listen", &format!("127.0.0.1:{metrics_port}")],
    );
    assert_eq!(get(metrics_port, "/health", None).0, "HTTP/1.1 200 OK");
    assert_eq!(get(metrics_port, "/ready", None).0, "HTTP/1.1 200 OK");
    assert_eq!(create(broker.port, "metered", 2), 0);
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut per_partition = [0u64; 2];
    // acks=0 gets no response: a failed one is counted all the same and closes its
    // connection (Kafka's signal to the producer); a good one keeps it open. (First,
    // so the acknowledged produces after it to partition 0 cover it.)
    let mut failed = produce_unacknowledged(broker.port, "metered", 9, build_batch(1, b"x", 0));
    assert!(
        closed(&mut failed),
        "a failed acks=0 produce closes the connection"
    );
    let unacknowledged = build_batch(1, b"x", 0);
    bytes += unacknowledged.len() as u64;
    records += 1;
    per_partition[0] += 1;
    let mut fine = produce_unacknowledged(broker.port, "metered", 0, unacknowledged);
    let _ = call(
        &mut fine,
        &kafka_protocol::messages::ApiVersionsRequest::default(),
        0,
    );
    for i in 0..15 {
        let batch = build_batch(7, b"counted", 1_700_000_000_000);
        bytes += batch.len() as u64;
        let (error, _) = produce(broker.port, "metered", i % 2, batch);
        assert_eq!(error, 0);
        records += 7;
        per_partition[i as usize % 2] += 7;
    }
    let (error, high_watermark, fetched) = fetch(broker.port, "metered", 0, 0);
    assert_eq!((error, high_watermark), (0, per_partition[0] as i64));
    // A group with no members commits (as a reset tool does) and stops.
    let mut commit = OffsetCommitRequest::default();
    commit.group_id = GroupId(StrBytes::from_static_str("readers"));
    commit.generation_id_or_member_epoch = -1;
    commit.topics = vec![OffsetCommitRequestTopic::default()
        .with_name(name("metered"))
        .with_partitions(vec![OffsetCommitRequestPartition::default()
            .with_partition_index(0)
            .with_committed_offset(10)])];
    let committed = call(&mut connect(broker.port), &commit, 8);
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    // A partition that does not exist: counted as a Fetch partition error.
    let (error, _, _) = fetch(broker.port, "metered", 7, 0);
    assert_ne!(error, 0);
    // A heartbeat from a member the group never had: a group API's own error.
    let mut beat = HeartbeatRequest::default();
    beat.group_id = GroupId(StrBytes::from_static_str("readers"));
    beat.member_id = StrBytes::from_static_str("ghost");
    beat.generation_id = 1;
    let answer = call(&mut connect(broker.port), &beat, 4);
    assert_ne!(answer.error_code, 0);
    // Partition offsets are published once a second.
    std::thread::sleep(Duration::from_millis(1500));

    let (status, text) = get(metrics_port, "/metrics", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    let samples = parse(&text, "prometheus");
    let topic = [("topic", "metered")];
    assert_eq!(
        sum(&samples, "weir_records_produced_total", &topic),
        records as f64
    );
    assert_eq!(
        sum(&samples, "weir_produced_bytes_total", &topic),
        bytes as f64
    );
    assert_eq!(
        sum(&samples, "weir_fetched_bytes_total", &topic),
        fetched.len() as f64
    );
    // 15 acknowledged produces and 2 with acks=0.
    assert_eq!(
        sum(&samples, "weir_kafka_requests_total", &[("api", "Produce")]),
        17.0
    );
    assert_eq!(
        sum(
            &samples,
            "weir_kafka_request_latency_seconds_count",
            &[("api", "Produce")]
        ),
        17.0
    );
    for (p, n) in per_partition.iter().enumerate() {
        let labels = [("topic", "metered"), ("partition", &p.to_string()[..])];
        assert_eq!(
            sum(&samples, "weir_partition_high_watermark", &labels),
            *n as f64
        );
        assert_eq!(
            sum(&samples, "weir_partition_log_end_offset", &labels),
            *n as f64
        );
        assert_eq!(
            sum(&samples, "weir_partition_log_start_offset", &labels),
            0.0
        );
        // One host: one replica, in sync, nobody behind.
        assert_eq!(sum(&samples, "weir_partition_replicas", &labels), 1.0);
        assert_eq!(
            sum(&samples, "weir_partition_in_sync_replicas", &labels),
            1.0
        );
        assert_eq!(sum(&samples, "weir_partition_replica_lag", &labels), 0.0);
    }
    assert!(sum(&samples, "weir_flush_rounds_total", &[]) >= 1.0);
    assert!(sum(&samples, "weir_flush_bytes_total", &[]) >= bytes as f64);
    // Every round writes whole 4 KiB pages: the data plus its partial pages.
    let written = sum(
        &samples,
        "weir_storage_written_bytes_total",
        &[("kind", "log")],
    );
    assert!(
        written >= sum(&samples, "weir_flush_bytes_total", &[]) && written % 4096.0 == 0.0,
        "log bytes written {written}"
    );
    // 1 create + 15 produces + 1 fetch, each on its own connection, and 2 scrapes ago.
    assert!(sum(&samples, "weir_connections_accepted_total", &[]) >= 17.0);
    let group = [
        ("group", "readers"),
        ("topic", "metered"),
        ("partition", "0"),
    ];
    assert_eq!(sum(&samples, "weir_group_committed_offset", &group), 10.0);
    assert_eq!(
        sum(&samples, "weir_group_lag", &group),
        (per_partition[0] - 10) as f64,
        "lag = high watermark - committed offset"
    );
    assert_eq!(
        sum(&samples, "weir_recovered_segments_total", &[]),
        0.0,
        "a fresh broker recovered nothing"
    );

    let (status, open) = get(
        metrics_port,
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(open.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
    let samples = parse(&open, "openmetrics");
    assert_eq!(
        sum(&samples, "weir_records_produced_total", &topic),
        records as f64
    );

    assert_eq!(
        sum(
            &samples,
            "weir_kafka_errors_total",
            &[("api", "Fetch"), ("error", "UnknownTopicOrPartition")]
        ),
        1.0
    );
    assert_eq!(
        sum(
            &samples,
            "weir_kafka_errors_total",
            &[("api", "Heartbeat"), ("error", "UnknownMemberId")]
        ),
        1.0
    );
    assert_eq!(
        sum(
            &samples,
            "weir_kafka_errors_total",
            &[("api", "Produce"), ("error", "UnknownTopicOrPartition")]
        ),
        1.0,
        "an acks=0 produce's error is counted"
    );
    dashboard_asks_only_for_served_metrics(&text);

    // promtool is installed by tests/run-all.sh (Debian's prometheus package).
    let out = run_with_input(
        Command::new("promtool").args(["check", "metrics"]),
        Some(text.as_bytes()),
        "promtool (installed by tests/run-all.sh)",
    );
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_endpoint_answers_only_what_it_serves_and_survives_the_rest() {
    let dir = scratch_dir();
    let metrics_port = free_port();
    let _broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--metrics-listen", &format!("127.0.0.1:{metrics_port}")],
    );
    let status = |answer: String| answer.lines().next().unwrap_or("").to_string();
    assert_eq!(
        status(exchange(metrics_port, b"POST /metrics HTTP/1.1\r\n\r\n")),
        "HTTP/1.1 405 Method Not Allowed"
    );
    assert_eq!(
        get(metrics_port, "/topics", None).0,
        "HTTP/1.1 404 Not Found"
    );
    assert_eq!(
        status(exchange(metrics_port, b"\x16\x03\x01garbage\r\n\r\n")),
        "HTTP/1.1 400 Bad Request"
    );
    let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    assert_eq!(
        status(exchange(metrics_port, huge.as_bytes())),
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
    // A client that stops half-way through its request is refused.
    assert_eq!(
        status(exchange(metrics_port, b"GET /metr")),
        "HTTP/1.1 400 Bad Request"
    );
    let (status, body) = get(metrics_port, "/metrics", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("weir_connections_open"));
}

#[test]
fn a_connection_closed_for_a_protocol_reason_is_logged_with_its_client() {
    let dir = scratch_dir();
    let metrics_port = free_port();
    let broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--metrics-listen", &format!("127.0.0.1:{metrics_port}")],
    );
    // As Sarama 1.22 does at its defaults: ApiVersions, then OffsetCommit v1, which weir
    // (like Kafka 4) no longer serves.
    let mut stream = connect(broker.port);
    let mut hello = ApiVersionsRequest::default();
    hello.client_software_name = StrBytes::from_static_str("old-client");
    hello.client_software_version = StrBytes::from_static_str("1.22");
    assert_eq!(call(&mut stream, &hello, 3).error_code, 0);
    // OffsetCommit (key 8) v1, correlation id 7, client id "weir-test", then a body the
    // broker never reads (kafka-protocol no longer encodes v1 either).
    let mut request = vec![0, 8, 0, 1, 0, 0, 0, 7, 0, 9];
    request.extend_from_slice(b"weir-test");
    request.extend_from_slice(&[0; 16]);
    let mut framed = (request.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&request);
    stream.write_all(&framed).expect("send");
    assert!(closed(&mut stream), "the broker closes the connection");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !broker.log().contains("old-client 1.22") {
        assert!(
            std::time::Instant::now() < deadline,
            "no info line names the client:\n{}",
            broker.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = broker.log();
    let line = log
        .lines()
        .find(|l| l.contains("old-client 1.22"))
        .expect("line");
    assert!(line.contains("INFO"), "{line}");
    assert!(line.contains("weir-test"), "the client id is in {line}");
    assert!(
        line.contains("OffsetCommit v1"),
        "the refused request is in {line}"
    );
    let (_, text) = get(metrics_port, "/metrics", None);
    let samples = parse(&text, "prometheus");
    assert_eq!(
        sum(
            &samples,
            "weir_connections_closed_total",
            &[("reason", "request")]
        ),
        1.0
    );
}

#[test]
fn ready_flips_from_503_to_200_across_a_restart_that_recovers() {
    let dir = scratch_dir();
    let metrics_port = free_port();
    let data = dir.path().join("data");
    let mut broker = Broker::start(
        &data,
        1,
        &["--metrics-listen", &format!("127.0.0.1:{metrics_port}")],
    );
    assert_eq!(create(broker.port, "recovering", 4), 0);
    let value = vec![7u8; 8000];
    for i in 0..400 {
        let (error, _) = produce(
            broker.port,
            "recovering",
            i % 4,
            build_batch(100, &value, 1_700_000_000_000),
        );
        assert_eq!(error, 0);
    }
    broker.kill();
    // Without their index files the segments are replayed whole (~80 MB): recovery takes
    // long enough to be seen from outside.
    let mut removed = 0;
    for entry in walk(&data) {
        let name = entry.to_string_lossy();
        if name.ends_with(".index") || name.ends_with(".timeindex") {
            std::fs::remove_file(&entry).expect("remove index");
            removed += 1;
        }
    }
    assert!(removed >= 8, "{removed} index files");
    let watcher = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", metrics_port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = s.write_all(b"GET /ready HTTP/1.1\r\n\r\n");
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                let status = out.lines().next().unwrap_or("").to_string();
                if seen.last() != Some(&status) {
                    seen.push(status.clone());
                }
                if status.contains(" 200 ") {
                    return seen;
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        seen
    });
    broker.restart();
    let seen = watcher.join().expect("watcher");
    assert_eq!(
        seen,
        vec![
            "HTTP/1.1 503 Service Unavailable".to_string(),
            "HTTP/1.1 200 OK".to_string()
        ],
        "not ready while recovering, then ready; log:\n{}",
        broker.log()
    );
    let (_, text) = get(metrics_port, "/metrics", None);
    let samples = parse(&text, "prometheus");
    assert!(sum(&samples, "weir_recovered_segments_total", &[]) >= 4.0);
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_deleted_topics_series_leave_the_scrape() {
    use kafka_protocol::messages::DeleteTopicsRequest;
    let dir = scratch_dir();
    let metrics_port = free_port();
    let broker = Broker::start(
        &dir.path().join("data"),
        1,
        &["--metrics-listen", &format!("127.0.0.1:{metrics_port}")],
    );
    for topic in ["doomed", "kept"] {
        assert_eq!(create(broker.port, topic, 1), 0);
        assert_eq!(produce(broker.port, topic, 0, build_batch(3, b"m", 0)).0, 0);
    }
    let scrape = || get(metrics_port, "/metrics", None).1;
    // Published within a second.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !scrape().contains("weir_partition_high_watermark{shard=\"0\",topic=\"doomed\"") {
        assert!(std::time::Instant::now() < deadline, "never published");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut req = DeleteTopicsRequest::default();
    req.topic_names = vec![name("doomed")];
    req.timeout_ms = 5000;
    assert_eq!(
        call(&mut connect(broker.port), &req, 4).responses[0].error_code,
        0
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = scrape();
        if !text.contains("topic=\"doomed\"") {
            assert!(
                text.contains("weir_records_produced_total{shard=\"0\",topic=\"kept\"} 3"),
                "{text}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a deleted topic's series are still scraped: {}",
            text.lines()
                .filter(|l| l.contains("doomed"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_second_host_on_a_taken_metrics_port_stops_at_start_naming_the_flag() {
    let dir = scratch_dir();
    let metrics = free_port();
    let listen = format!("127.0.0.1:{metrics}");
    let _first = Broker::start(&dir.path().join("a"), 1, &["--metrics-listen", &listen]);
    let port = common::broker::free_ports_on(&["127.0.0.1"], 1);
    let out = Command::new("timeout")
        .arg("30")
        .arg(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--config", common::broker::SHARED_PROFILE])
        .args(["--listen", &format!("127.0.0.1:{port}"), "--shards", "1"])
        .args(["--metrics-listen", &listen])
        .arg("--data-dir")
        .arg(dir.path().join("b"))
        .output()
        .expect("run weir");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the second host started: {stderr}");
    assert!(
        stderr.contains(&format!("metrics endpoint {listen}"))
            && stderr.contains("--metrics-listen"),
        "the error names the endpoint and the flag:\n{stderr}"
    );
}
