//! Apache Kafka's own JVM clients against real weir processes: the Java client 4.4
//! (producer, consumer, AdminClient, transactions), Kafka's command-line tools, Kafka
//! Streams (a word count, at least once and exactly_once_v2) and Kafka Connect (a file through a topic and back), from the Maven project in
//! `tests/jvm`, one JVM per topology: one host and a 3-host RF 3 cluster, each over
//! plaintext and over SASL_SSL with ACLs enforced; and a Streams exactly_once_v2 word
//! count on three hosts that are killed under it one after another.

#[allow(dead_code)]
mod common;

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use common::{
    broker::{free_ports_on, Broker},
    cluster::{run_weir, Cluster},
    jvm::{compat_main, failures_of, run_cases, Target},
    pki::{pki, Pki},
    scratch_dir,
};

/// Every case that needs nothing but a reachable broker.
const CLIENT_CASES: &[&str] = &[
    "ProducerCases",
    "ConsumerCases",
    "AdminCases",
    "ToolCases",
    "StreamsCases",
    "ConnectCases",
    "TransactionCases",
];

/// The super user the secured runs log in as.
const ADMIN: &str = "admin:admin-secret";

/// `weir serve`'s flags for SASL (every mechanism) with ACLs enforced and `ADMIN` a
/// super user.
fn sasl_flags() -> Vec<String> {
    [
        "--sasl-mechanisms",
        "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "--sasl-user",
        ADMIN,
        "--authorizer",
        "acl",
        "--super-users",
        "User:admin",
    ]
    .map(String::from)
    .to_vec()
}

/// What a Java user writes for SASL_SSL with SCRAM, the CA as a PEM trust store, as a
/// properties file in `dir`.
fn sasl_ssl_client_config(dir: &Path, pki: &Pki) -> PathBuf {
    let (user, password) = ADMIN.split_once(':').expect("NAME:PASSWORD");
    let path = dir.join("client.properties");
    std::fs::write(
        &path,
        format!(
            "security.protocol=SASL_SSL\n\
             sasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"{user}\" password=\"{password}\";\n\
             ssl.truststore.type=PEM\n\
             ssl.truststore.location={}\n",
            pki.ca.display()
        ),
    )
    .expect("write client.properties");
    path
}

/// Runs every case and the ACL cases over SASL_SSL at `bootstrap` as `ADMIN`, the client
/// settings and the report in `dir`.
fn run_secured_cases(
    dir: &Path,
    pki: &Pki,
    bootstrap: &str,
    replication_factor: u16,
    logs: impl FnOnce() -> String,
) {
    let client_config = sasl_ssl_client_config(dir, pki);
    let target = Target {
        bootstrap,
        replication_factor,
        client_config: Some(&client_config),
    };
    let mut cases = CLIENT_CASES.to_vec();
    cases.push("AclCases");
    run_cases(&target, &cases, &dir.join("jvm-report.txt"), 900, logs);
}

/// Every host's bootstrap address, comma-separated.
fn all_bootstraps(cluster: &Cluster) -> String {
    cluster
        .hosts
        .iter()
        .map(|h| h.bootstrap())
        .collect::<Vec<_>>()
        .join(",")
}

/// Every host's log, for a failure message.
fn cluster_logs(cluster: &Cluster) -> String {
    cluster
        .hosts
        .iter()
        .map(|h| format!("host {} log:\n{}", h.id, h.log()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until the cluster places an RF 3 topic, i.e. every host has registered with the
/// controller (`login` for a cluster that requires SASL).
fn await_three_live_hosts(cluster: &Cluster, login: Option<&str>) {
    let bootstrap = cluster.hosts[0].bootstrap();
    let mut args = vec!["topics", "--bootstrap", &bootstrap];
    if let Some(user) = login {
        args.extend(["--sasl-user", user]);
    }
    args.extend([
        "create",
        "jvm-probe",
        "--partitions",
        "1",
        "--replication-factor",
        "3",
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, out) = run_weir(&args);
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no RF 3 topic after 30 s: {out}\n{}",
            cluster_logs(cluster)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn java_client_tools_streams_and_connect_work_against_one_host() {
    let dir = scratch_dir();
    let broker = Broker::start(&dir.path().join("data"), 2, &[]);
    let bootstrap = broker.bootstrap();
    let target = Target {
        bootstrap: &bootstrap,
        replication_factor: 1,
        client_config: None,
    };
    run_cases(
        &target,
        CLIENT_CASES,
        &dir.path().join("jvm-report.txt"),
        900,
        || format!("broker log:\n{}", broker.log()),
    );
}

#[test]
fn java_client_tools_streams_and_connect_work_against_a_three_host_rf3_cluster() {
    let cluster = Cluster::start(3, 1);
    await_three_live_hosts(&cluster, None);
    let bootstrap = all_bootstraps(&cluster);
    let target = Target {
        bootstrap: &bootstrap,
        replication_factor: 3,
        client_config: None,
    };
    run_cases(
        &target,
        CLIENT_CASES,
        &cluster.dir.path().join("jvm-report.txt"),
        900,
        || cluster_logs(&cluster),
    );
}

#[test]
fn java_client_tools_streams_connect_and_acls_work_over_sasl_ssl() {
    let dir = scratch_dir();
    let pki = pki(dir.path(), "jvm");
    let tls_port = free_ports_on(&["127.0.0.1"], 2);
    let tls_bootstrap = format!("127.0.0.1:{tls_port}");
    let mut flags = pki.listener_flags(&tls_bootstrap);
    flags.extend(sasl_flags());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let broker = Broker::start(&dir.path().join("data"), 2, &flags);
    run_secured_cases(dir.path(), &pki, &tls_bootstrap, 1, || {
        format!("broker log:\n{}", broker.log())
    });
}

#[test]
fn java_client_tools_streams_connect_and_acls_work_over_sasl_ssl_on_a_three_host_rf3_cluster() {
    let keys = scratch_dir();
    let pki = pki(keys.path(), "jvm-cluster");
    let ips = ["127.0.0.1", "127.0.0.2", "127.0.0.3"];
    let tls_port = free_ports_on(&ips, 1);
    let cluster = Cluster::start_configured(3, 1, |id| {
        let mut flags = pki.listener_flags(&format!("127.0.0.{id}:{tls_port}"));
        flags.extend(sasl_flags());
        flags
    });
    await_three_live_hosts(&cluster, Some(ADMIN));
    let bootstrap = ips
        .iter()
        .map(|ip| format!("{ip}:{tls_port}"))
        .collect::<Vec<_>>()
        .join(",");
    run_secured_cases(keys.path(), &pki, &bootstrap, 3, || cluster_logs(&cluster));
}

#[test]
fn kafka_streams_exactly_once_v2_counts_exactly_while_each_host_is_killed() {
    // Where each consumer resumed and when each transaction's offsets were written and
    // ended, in the hosts' logs: what a run that counted a line twice is read from.
    let mut cluster = Cluster::start_configured(3, 1, |_| {
        [
            "--session-timeout",
            "3s",
            "--log-level",
            "info,weir::api::offset_fetch=debug,weir::group::coordinator::txn_offsets=debug",
        ]
        .map(String::from)
        .to_vec()
    });
    await_three_live_hosts(&cluster, None);
    let bootstrap = all_bootstraps(&cluster);
    let target = Target {
        bootstrap: &bootstrap,
        replication_factor: 3,
        client_config: None,
    };
    let state = scratch_dir();
    let log = cluster.dir.path().join("eos-under-faults.log");
    let out = std::fs::File::create(&log).expect("create the app's log");
    // WEIR_EOS_CYCLES=N kills every host N times (one a second's writing per kill
    // cycle's 24 s) for a longer look; one cycle by default.
    let cycles: u32 = std::env::var("WEIR_EOS_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut app = compat_main("EosUnderFaults", &target)
        .arg(state.path())
        .arg((24 * cycles).to_string())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("start the Streams application");
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(90);
    while !said().contains("streams running") {
        if Instant::now() > deadline || app.try_wait().ok().flatten().is_some() {
            let _ = app.kill();
            let _ = app.wait();
            panic!("the Streams application never ran:\n{}", said());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // While its lines are written (24 rounds, one a second), each host in turn is
    // killed -9 and started again two seconds later: partition leaders, group and
    // transaction coordinators and the controller all move under the application.
    for victim in (0..cycles).flat_map(|_| 1..=3) {
        std::thread::sleep(Duration::from_secs(4));
        eprintln!("killing host {victim}");
        cluster.host(victim).kill();
        std::thread::sleep(Duration::from_secs(2));
        cluster.host(victim).spawn();
        cluster.host(victim).wait_serving();
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = app.try_wait().expect("wait for the application") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = app.kill();
            let _ = app.wait();
            panic!(
                "the Streams application did not finish in 300 s:\n{}",
                said()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let text = said();
    let summary = failures_of(&text);
    assert!(
        status.success() && text.contains("every count exact"),
        "Kafka Streams exactly_once_v2 under host kills failed ({status}):\n{summary}\n{}",
        cluster_logs(&cluster)
    );
    eprintln!(
        "{}",
        text.lines()
            .filter(|l| l.starts_with("sent ")
                || l.starts_with("every count")
                || l.contains(" lines seen, repeated: "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
