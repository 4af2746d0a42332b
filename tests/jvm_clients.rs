//! Apache Kafka's own JVM clients against real weir processes: the Java client 4.4
//! (producer, consumer, AdminClient), Kafka's command-line tools, Kafka Streams (a word
//! count) and Kafka Connect (a file through a topic and back), from the Maven project in
//! `tests/jvm`, one JVM per topology.

#[allow(dead_code)]
mod common;

use common::{
    broker::Broker,
    jvm::{run_cases, Target},
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
