//! Several real `weir serve` hosts on loopback addresses as one cluster (Cluster I): one
//! metadata view from every host, clients of every kind served across hosts, groups
//! coordinated anywhere, a controller quorum that survives losing a minority and a
//! whole restart, hosts that join, get fenced and return, a single host's data
//! directory joining as a cluster, and the refusals.

#[allow(dead_code)]
mod common;

use std::{process::Command, time::Duration};

use common::{
    broker::Broker,
    cluster::{coordinator_node, run_weir, Cluster, Host},
    interop::run_script_logged,
    kcat, scratch_dir,
};

fn produce(bootstrap: &str, topic: &str, from: usize, n: usize) {
    let lines: String = (from..from + n).map(|i| format!("k{i}:v{i}\n")).collect();
    kcat(
        &["-b", bootstrap, "-t", topic, "-P", "-K:", "-X", "acks=all"],
        Some(&lines),
    );
}

fn count(bootstrap: &str, topic: &str) -> usize {
    kcat(&["-b", bootstrap, "-t", topic, "-C", "-e", "-q"], None)
        .lines()
        .count()
}

fn interop(name: &str, args: &[&str], cluster: &Cluster) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    run_script_logged(name, &args, || {
        cluster
            .hosts
            .iter()
            .map(|h| format!("--- host {}\n{}", h.id, h.log()))
            .collect()
    });
}

/// The hosts (by node id / 1024) leading the partitions of `topic`, as `kcat -L` says.
fn leader_hosts(bootstrap: &str, topic: &str) -> Vec<i64> {
    leader_hosts_nodes(bootstrap, topic)
        .into_iter()
        .map(|node| if node < 0 { -1 } else { node / 1024 })
        .collect()
}

/// A group name whose coordinator is on host `host`.
fn group_coordinated_by(cluster: &Cluster, bootstrap: &str, host: i64) -> String {
    for i in 0..200 {
        let group = format!("workers-{i}");
        let (ok, out) = cluster.weir(&["groups", "--bootstrap", bootstrap, "describe", &group]);
        assert!(ok, "{out}");
        let node = coordinator_node(&out);
        if node / 1024 == host {
            return group;
        }
    }
    panic!("no group coordinated by host {host}");
}

#[test]
fn three_hosts_serve_one_cluster_to_every_client() {
    let mut cluster = Cluster::start(3, 2);
    let metadata = cluster.converged_metadata(Duration::from_secs(15));
    assert!(metadata.contains("6 brokers"), "{metadata}");
    for node in [1024, 1025, 2048, 2049, 3072, 3073] {
        assert!(
            metadata.contains(&format!("broker {node} at ")),
            "{metadata}"
        );
    }
    let b1 = cluster.host(1).bootstrap();
    let b2 = cluster.host(2).bootstrap();
    create_topic(&b2, "spread", 6);
    let mut hosts = leader_hosts(&b1, "spread");
    hosts.sort();
    assert_eq!(
        hosts,
        [1, 1, 2, 2, 3, 3],
        "partitions spread evenly over every shard"
    );
    // Two hosts alter different configs of one topic at once: neither change is lost.
    let b3 = cluster.host(3).bootstrap();
    let alters: Vec<_> = [(&b1, "retention.ms=3600000"), (&b3, "segment.ms=600000")]
        .into_iter()
        .map(|(bootstrap, kv)| {
            let args = [
                "topics",
                "--bootstrap",
                bootstrap,
                "alter-config",
                "spread",
                kv,
            ]
            .map(String::from);
            let weir = env!("CARGO_BIN_EXE_weir");
            std::thread::spawn(move || Command::new(weir).args(&args).output())
        })
        .collect();
    for a in alters {
        let out = a.join().expect("thread").expect("run weir");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (ok, out) = cluster.weir(&["topics", "--bootstrap", &b2, "describe", "spread"]);
    assert!(
        ok && out.contains("retention.ms\t3600000") && out.contains("segment.ms\t600000"),
        "both alters kept: {out}"
    );
    produce(&b2, "spread", 0, 600);
    assert_eq!(count(&cluster.host(3).bootstrap(), "spread"), 600);
    let (ok, out) = cluster.weir(&["topics", "--bootstrap", &b1, "describe", "spread"]);
    assert!(ok && out.contains("REPLICAS"), "{out}");

    interop(
        "kafka_python_roundtrip.py",
        &[&b1, "kp-cluster", "500"],
        &cluster,
    );
    interop(
        "confluent_kafka_roundtrip.py",
        &[&b2, "ck-cluster", "500"],
        &cluster,
    );

    // A group whose coordinator is on host 3, used through host 1; its members and its
    // coordinator's host restart between the phases.
    let group = group_coordinated_by(&cluster, &b1, 3);
    let keys = cluster.dir.path().join("keys");
    let keys = keys.to_str().expect("utf-8 path");
    interop(
        "cluster_group.py",
        &["first", &b1, "grouped", &group, "600", keys],
        &cluster,
    );
    let coordinator = cluster.host(3);
    coordinator.kill();
    coordinator.spawn();
    coordinator.wait_serving();
    interop(
        "cluster_group.py",
        &["second", &b1, "grouped", &group, "600", keys],
        &cluster,
    );
    cluster.converged_metadata(Duration::from_secs(15));
}

#[test]
fn the_quorum_survives_a_minority_and_a_whole_restart() {
    let mut cluster = Cluster::start(3, 1);
    let b = |c: &mut Cluster, id: u32| c.host(id).bootstrap();
    let b1 = b(&mut cluster, 1);
    create_topic(&b1, "kept", 3);
    produce(&b1, "kept", 0, 300);
    let (ok, out) = cluster.weir(&[
        "groups",
        "--bootstrap",
        &b1,
        "reset-offsets",
        "kept-group",
        "--topic",
        "kept",
        "--to-offset",
        "7",
    ]);
    assert!(ok, "{out}");

    // A non-leader voter, then the leader: 2 of 3 still create topics.
    for round in 0..2 {
        let leader = cluster.leader();
        let victim = if round == 0 { leader % 3 + 1 } else { leader };
        cluster.host(victim).kill();
        let alive = b(&mut cluster, victim % 3 + 1);
        let name = format!("two-of-three-{round}");
        let started = std::time::Instant::now();
        let (ok, out) = cluster.weir(&[
            "topics",
            "--bootstrap",
            &alive,
            "create",
            &name,
            "--partitions",
            "2",
        ]);
        assert!(ok, "round {round}: {out}");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "created in {:?}",
            started.elapsed()
        );
        let host = cluster.host(victim);
        host.spawn();
        host.wait_serving();
        cluster.converged_metadata(Duration::from_secs(15));
    }

    // A majority lost: no metadata changes, but the survivor still serves its partitions.
    let survivor = cluster.leader() % 3 + 1;
    for id in (1..=3).filter(|id| *id != survivor) {
        cluster.host(id).kill();
    }
    let alive = b(&mut cluster, survivor);
    let (ok, out) = cluster.weir(&[
        "topics",
        "--bootstrap",
        &alive,
        "create",
        "no-quorum",
        "--partitions",
        "1",
    ]);
    assert!(!ok, "a topic was created without a quorum: {out}");
    assert!(
        out.contains("RequestTimedOut")
            || out.contains("NotController")
            || out.contains("timed out")
            || out.contains("controller"),
        "{out}"
    );
    let local = leader_hosts(&alive, "kept")
        .iter()
        .position(|h| *h == i64::from(survivor))
        .expect("the survivor leads a partition of kept");
    let line = "survivor:still-served\n";
    kcat(
        &[
            "-b",
            &alive,
            "-t",
            "kept",
            "-P",
            "-K:",
            "-p",
            &local.to_string(),
        ],
        Some(line),
    );
    for id in (1..=3).filter(|id| *id != survivor) {
        cluster.host(id).spawn();
    }
    for h in &mut cluster.hosts {
        h.wait_serving();
    }
    let before = settled_metadata(&cluster);

    // Every host killed at once and restarted: the same metadata, messages and offsets.
    for h in &mut cluster.hosts {
        h.kill();
    }
    for h in &mut cluster.hosts {
        h.spawn();
    }
    for h in &mut cluster.hosts {
        h.wait_serving();
    }
    let after = settled_metadata(&cluster);
    assert_eq!(
        after.replace(" (controller)", ""),
        before.replace(" (controller)", "")
    );
    assert_eq!(count(&b1, "kept"), 301);
    let (ok, out) = cluster.weir(&["groups", "--bootstrap", &b1, "describe", "kept-group"]);
    assert!(ok, "{out}");
    let committed: Vec<&str> = out.lines().filter(|l| l.starts_with("kept\t")).collect();
    assert_eq!(committed.len(), 3, "{out}");
    assert!(
        committed.iter().all(|l| l.split('\t').nth(2) == Some("7")),
        "{out}"
    );
}

#[test]
fn a_broker_only_host_joins_and_a_silent_host_is_fenced_then_refusals() {
    let mut cluster = Cluster::start(3, 1);
    let b1 = cluster.host(1).bootstrap();
    cluster.add_broker(4, 1);
    let status = cluster.status();
    let host4 = status["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .find(|h| h["host"] == 4)
        .expect("host 4 registered")
        .clone();
    assert_eq!(host4["voter"], false);
    create_topic(&b1, "wide", 8);
    let hosts = leader_hosts(&b1, "wide");
    assert_eq!(
        hosts.iter().filter(|h| **h == 4).count(),
        2,
        "new topics use host 4: {hosts:?}"
    );

    // Silent for longer than the session timeout (2 s): fenced, its partitions leaderless.
    cluster.host(4).signal("STOP");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !leader_hosts(&b1, "wide").contains(&-1) {
        assert!(
            std::time::Instant::now() < deadline,
            "host 4 was never fenced"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let controller = cluster.host(1).controller();
    let (ok, out) = cluster.weir(&["cluster", "status", "--controller", &controller]);
    assert!(ok && out.contains("fenced"), "{out}");
    cluster.host(4).signal("CONT");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while leader_hosts(&b1, "wide").contains(&-1) {
        assert!(
            std::time::Instant::now() < deadline,
            "host 4 never came back"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Refusals: a second host claiming node id 4, a host with another voter list, a data
    // directory of another cluster; then a replication factor above 1.
    let impostor = cluster.unstarted_host(5, 1, &[]);
    refused_start(
        &impostor,
        &[("--node-id", "4".into())],
        "node id 4 is taken",
    );
    let other = cluster.unstarted_host(6, 1, &[]);
    let first_voter = cluster.host(1).controller();
    let voters = format!("1@{first_voter}");
    refused_start(
        &other,
        &[("--controller-quorum-voters", voters)],
        "the quorum is",
    );
    let stranger = cluster.unstarted_host(7, 1, &[]);
    std::fs::create_dir_all(&stranger.data_dir).expect("dir");
    std::fs::write(
        stranger.data_dir.join("cluster.json"),
        r#"{"cluster_id":"another-cluster","node_id":7}"#,
    )
    .expect("identity");
    refused_start(&stranger, &[], "belongs to cluster another-cluster");

    interop("cluster_refusals.py", &[&b1], &cluster);
}

#[test]
fn a_single_host_data_directory_joins_as_a_one_host_cluster() {
    let dir = scratch_dir();
    let data = dir.path().join("data");
    let mut single = Broker::start(&data, 2, &[]);
    let b = single.bootstrap();
    create_topic(&b, "legacy", 4);
    produce(&b, "legacy", 0, 200);
    let (ok, out) = run_weir(&[
        "groups",
        "--bootstrap",
        &b,
        "reset-offsets",
        "legacy-group",
        "--topic",
        "legacy",
        "--to-offset",
        "3",
    ]);
    assert!(ok, "{out}");
    let placed = leader_hosts_nodes(&b, "legacy");
    single.stop();
    drop(single);

    let port = common::broker::free_port();
    let controller = common::broker::free_port();
    let mut host = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .args(["--config", common::broker::SHARED_PROFILE])
        .args(["--node-id", "1"])
        .args([
            "--controller-quorum-voters",
            &format!("1@127.0.0.1:{controller}"),
        ])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--shards",
            "2",
            "--cores",
            "0,1",
        ])
        .arg("--data-dir")
        .arg(&data)
        .args(["--metrics-listen", "off"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start");
    let b = format!("127.0.0.1:{port}");
    let addr: std::net::SocketAddr = b.parse().expect("addr");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !common::broker::answers_api_versions(addr) {
        assert!(
            std::time::Instant::now() < deadline,
            "the upgraded host did not serve"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let upgraded = leader_hosts_nodes(&b, "legacy");
    assert_eq!(
        upgraded,
        placed.iter().map(|n| 1024 + n).collect::<Vec<_>>(),
        "every partition stays on the shard that holds its data"
    );
    assert_eq!(count(&b, "legacy"), 200);
    let (ok, out) = run_weir(&["groups", "--bootstrap", &b, "describe", "legacy-group"]);
    let committed: Vec<&str> = out.lines().filter(|l| l.starts_with("legacy\t")).collect();
    assert!(ok && committed.len() == 4, "{out}");
    assert!(
        committed.iter().all(|l| l.split('\t').nth(2) == Some("3")),
        "{out}"
    );
    let _ = host.kill();
    let _ = host.wait();
}

/// The metadata every host agrees on once every replicated partition (the offsets
/// journal's) is whole again: all replicas in sync, led by the preferred one (hosts
/// that restarted rejoin ISRs in seconds, leadership returns after a quiet period).
fn settled_metadata(cluster: &Cluster) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let metadata = cluster.converged_metadata(Duration::from_secs(20));
        let settled = metadata
            .lines()
            .filter(|l| l.trim_start().starts_with("partition "))
            .all(|l| {
                let field = |name: &str| {
                    l.split(name)
                        .nth(1)
                        .map(|rest| rest.split(", ").next().unwrap_or("").trim().to_string())
                };
                let replicas = field("replicas: ").unwrap_or_default();
                let leader = field("leader ").unwrap_or_default();
                let mut isr: Vec<&str> = Vec::new();
                let isrs = field("isrs: ").unwrap_or_default();
                isr.extend(isrs.split(','));
                let mut all: Vec<&str> = replicas.split(',').collect();
                isr.sort();
                all.sort();
                isr == all && replicas.split(',').next() == Some(leader.as_str())
            });
        if settled {
            return metadata;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "replicated partitions never settled:\n{metadata}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Creates `name` with `partitions` single-replica partitions through `bootstrap`.
fn create_topic(bootstrap: &str, name: &str, partitions: u32) {
    common::cluster::create_topic(bootstrap, name, partitions, 1);
}

/// Runs `host`'s command line with some flags' values replaced and asserts it exits
/// non-zero saying `why`.
fn refused_start(host: &Host, replace: &[(&str, String)], why: &str) {
    let mut args: Vec<String> = host
        .command()
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    for (flag, value) in replace {
        let at = args.iter().position(|a| a == flag).expect("flag") + 1;
        args[at] = value.clone();
    }
    let out = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_weir"))
        .args(&args)
        .output()
        .expect("run weir");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{why}: the host started: {text}");
    assert!(text.contains(why), "expected {why:?}: {text}");
}

/// The leader node of each partition of `topic`, in partition order.
fn leader_hosts_nodes(bootstrap: &str, topic: &str) -> Vec<i64> {
    kcat(&["-b", bootstrap, "-L", "-t", topic], None)
        .lines()
        .filter_map(|l| l.split("leader ").nth(1))
        .map(|l| {
            l.split(',')
                .next()
                .unwrap_or("")
                .trim()
                .parse::<i64>()
                .expect("leader")
        })
        .collect()
}

#[test]
fn a_controller_only_voter_serves_no_clients_but_counts_in_the_quorum() {
    let mut cluster = Cluster::start_with(3, 1, &[3]);
    let metadata = cluster.converged_metadata(Duration::from_secs(15));
    assert!(
        metadata.contains("2 brokers"),
        "host 3 is not a broker: {metadata}"
    );
    let status = cluster.status();
    let hosts: Vec<u64> = status["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| h["host"].as_u64().expect("id"))
        .collect();
    assert_eq!(hosts, [1, 2], "only brokers register");
    assert_eq!(status["voters"].as_array().map(Vec::len), Some(3));
    // With voter 2 gone, the controller-only voter makes the majority.
    cluster.host(2).kill();
    let b1 = cluster.host(1).bootstrap();
    create_topic(&b1, "majority", 2);
    assert!(
        !Command::new("timeout")
            .args([
                "5",
                "kcat",
                "-b",
                &cluster.host(3).bootstrap(),
                "-L",
                "-m",
                "3"
            ])
            .status()
            .expect("kcat")
            .success(),
        "a controller-only host has no Kafka listener"
    );
}

#[test]
fn tls_clients_get_every_hosts_tls_ports() {
    let scratch = scratch_dir();
    let pki = common::pki::pki(scratch.path(), "cluster");
    let ips: Vec<String> = (1..=3).map(|n| format!("127.0.0.{n}")).collect();
    let ip_refs: Vec<&str> = ips.iter().map(String::as_str).collect();
    let tls_port = common::broker::free_ports_on(&ip_refs, 1);
    let (cert, key) = (pki.server_cert.clone(), pki.server_key.clone());
    let mut cluster = Cluster::start_configured(3, 1, |id| {
        vec![
            "--tls-listen".into(),
            format!("127.0.0.{id}:{tls_port}"),
            "--tls-cert".into(),
            cert.display().to_string(),
            "--tls-key".into(),
            key.display().to_string(),
        ]
    });
    cluster.converged_metadata(Duration::from_secs(15));
    let tls = |id: u32| format!("127.0.0.{id}:{tls_port}");
    let ca = format!("ssl.ca.location={}", pki.ca.display());
    let over_tls = |bootstrap: &str, rest: &[&str]| {
        let mut args = vec!["-b", bootstrap, "-X", "security.protocol=ssl", "-X", &ca];
        args.extend_from_slice(rest);
        args.iter().map(|s| s.to_string()).collect::<Vec<String>>()
    };
    let run = |args: Vec<String>, input: Option<&str>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        kcat(&refs, input)
    };
    let metadata = run(over_tls(&tls(2), &["-L"]), None);
    for id in 1..=3 {
        assert!(
            metadata.contains(&format!("at 127.0.0.{id}:{tls_port}")),
            "host {id}'s TLS port: {metadata}"
        );
    }
    let b1 = cluster.host(1).bootstrap();
    create_topic(&b1, "sealed", 3);
    let lines: String = (0..90).map(|i| format!("k{i}:v{i}\n")).collect();
    run(
        over_tls(&tls(3), &["-t", "sealed", "-P", "-K:"]),
        Some(&lines),
    );
    let got = run(over_tls(&tls(1), &["-t", "sealed", "-C", "-e", "-q"]), None);
    assert_eq!(got.lines().count(), 90, "across all three hosts over TLS");
}
