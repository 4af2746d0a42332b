//! Apache Kafka's own JVM clients against real weir processes: the Java client 4.4
//! (producer, consumer, AdminClient), Kafka's command-line tools, Kafka Streams (a word
//! count) and Kafka Connect (a file through a topic and back), from the Maven project in
//! `tests/jvm`, one JVM per topology.

#[allow(dead_code)]
mod common;

use common::{
    broker::{free_ports_on, Broker},
    cluster::Cluster,
    jvm::{run_cases, Target},
    pki::pki,
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
];

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
    cluster.converged_metadata(std::time::Duration::from_secs(30));
    let bootstrap = cluster
        .hosts
        .iter()
        .map(|h| h.bootstrap())
        .collect::<Vec<_>>()
        .join(",");
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
        || {
            cluster
                .hosts
                .iter()
                .map(|h| format!("host {} log:\n{}", h.id, h.log()))
                .collect::<Vec<_>>()
                .join("\n")
        },
    );
}

#[test]
fn java_client_tools_streams_connect_and_acls_work_over_sasl_ssl() {
    let dir = scratch_dir();
    let pki = pki(dir.path(), "jvm");
    let tls_port = free_ports_on(&["127.0.0.1"], 2);
    let tls_bootstrap = format!("127.0.0.1:{tls_port}");
    let mut flags = pki.listener_flags(&tls_bootstrap);
    flags.extend(
        [
            "--sasl-mechanisms",
            "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "--sasl-user",
            "admin:admin-secret",
            "--authorizer",
            "acl",
            "--super-users",
            "User:admin",
        ]
        .map(String::from),
    );
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let broker = Broker::start(&dir.path().join("data"), 2, &flags);
    // What a Java user writes for SASL_SSL with SCRAM: the CA as a PEM trust store.
    let client_config = dir.path().join("client.properties");
    std::fs::write(
        &client_config,
        format!(
            "security.protocol=SASL_SSL\n\
             sasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"admin\" password=\"admin-secret\";\n\
             ssl.truststore.type=PEM\n\
             ssl.truststore.location={}\n",
            pki.ca.display()
        ),
    )
    .expect("write client.properties");
    let target = Target {
        bootstrap: &tls_bootstrap,
        replication_factor: 1,
        client_config: Some(&client_config),
    };
    let mut cases = CLIENT_CASES.to_vec();
    cases.push("AclCases");
    run_cases(
        &target,
        &cases,
        &dir.path().join("jvm-report.txt"),
        900,
        || format!("broker log:\n{}", broker.log()),
    );
}
