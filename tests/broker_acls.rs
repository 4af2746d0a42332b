//! ACLs enforced with `--authorizer acl`: principals logged in with SASL get exactly
//! what their ACLs allow — produce needs WRITE, fetch READ, group APIs READ on the group,
//! CreateTopics CREATE, DeleteTopics DELETE, the ACL and user APIs ALTER on the cluster;
//! Metadata lists only describable topics; a deny wins; super users bypass; refused
//! writes store nothing; ACLs survive a restart; `weir acls` manages them.

#[allow(dead_code)]
mod common;

use std::process::Command;

use common::{
    broker::Broker,
    interop::run_script,
    kafka_client::{fetch_request, name, produce_request},
    scratch_dir,
};
use kafka_protocol::{
    messages::{
        create_topics_request::CreatableTopic,
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic},
        CreateAclsRequest, CreateTopicsRequest, DeleteTopicsRequest, GroupId, ListOffsetsRequest,
        MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest,
    },
    ResponseError,
};
use weir_client::{
    blocking::Connection,
    record_batch::build_batch,
    sasl::{SaslLogin, SaslMechanism},
};

const ADMIN: &str = "admin:admin-secret";

fn weir(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .expect("run weir");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "weir {args:?}: {text}");
    text
}

/// `weir acls|users|topics …` logged in as the admin.
fn as_admin(broker: &Broker, command: &str, rest: &[&str]) -> String {
    let at = broker.bootstrap();
    let mut args = vec![command, "--bootstrap", &at, "--sasl-user", ADMIN];
    args.extend_from_slice(rest);
    weir(&args)
}

fn connect(broker: &Broker, user: &str) -> Connection {
    let login = SaslLogin::parse(SaslMechanism::Plain, user).expect("login");
    Connection::open_as(&broker.bootstrap(), "acl-test", Some(&login)).expect("logs in")
}

fn produce_code(c: &mut Connection, topic: &str) -> i16 {
    let request = produce_request(topic, 0, build_batch(1, b"v", 1), -1);
    let answer = c.call(&request, 9).expect("produce answered");
    answer.responses[0].partition_responses[0].error_code
}

fn fetch_code(c: &mut Connection, topic: &str) -> i16 {
    let answer = c
        .call(&fetch_request(topic, 0, 0, 1 << 20), 12)
        .expect("fetch answered");
    answer.responses[0].partitions[0].error_code
}

fn end_offset(c: &mut Connection, topic: &str) -> i64 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let mut request = ListOffsetsRequest::default();
    request.replica_id = kafka_protocol::messages::BrokerId(-1);
    request.topics = vec![ListOffsetsTopic::default()
        .with_name(name(topic))
        .with_partitions(vec![ListOffsetsPartition::default()
            .with_partition_index(0)
            .with_timestamp(-1)])];
    let answer = c.call(&request, 7).expect("list offsets");
    let p = &answer.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

fn commit_code(c: &mut Connection, group: &str, topic: &str) -> i16 {
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(group.to_string().into());
    request.generation_id_or_member_epoch = -1;
    request.topics = vec![OffsetCommitRequestTopic::default()
        .with_name(name(topic))
        .with_partitions(vec![OffsetCommitRequestPartition::default()
            .with_partition_index(0)
            .with_committed_offset(1)])];
    let answer = c.call(&request, 8).expect("commit answered");
    answer.topics[0].partitions[0].error_code
}

fn listed_topics(c: &mut Connection) -> Vec<String> {
    let mut request = MetadataRequest::default();
    request.topics = None;
    let answer = c.call(&request, 12).expect("metadata");
    answer
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.as_str().to_string()))
        .collect()
}

#[test]
fn acls_decide_what_each_principal_may_do() {
    let dir = scratch_dir();
    let mut broker = Broker::start(
        &dir.path().join("data"),
        1,
        &[
            "--sasl-mechanisms",
            "SCRAM-SHA-512,PLAIN",
            "--sasl-user",
            ADMIN,
            "--authorizer",
            "acl",
            "--super-users",
            "User:admin",
        ],
    );
    as_admin(
        &broker,
        "users",
        &["create", "alice", "--password", "alice-pw"],
    );
    as_admin(&broker, "users", &["create", "bob", "--password", "bob-pw"]);
    as_admin(
        &broker,
        "topics",
        &["create", "orders", "--partitions", "1"],
    );
    as_admin(&broker, "topics", &["create", "audit", "--partitions", "1"]);
    let mut alice = connect(&broker, "alice:alice-pw");
    let mut admin = connect(&broker, ADMIN);

    // No ACL: alice sees no topic, writes nothing, reads nothing, creates nothing.
    assert!(listed_topics(&mut alice).is_empty());
    assert_eq!(
        listed_topics(&mut admin).len(),
        2,
        "a super user sees everything"
    );
    let refused = ResponseError::TopicAuthorizationFailed.code();
    assert_eq!(produce_code(&mut alice, "orders"), refused);
    assert_eq!(
        end_offset(&mut admin, "orders"),
        0,
        "a refused produce stores nothing"
    );
    assert_eq!(fetch_code(&mut alice, "orders"), refused);
    let mut create = CreateTopicsRequest::default();
    create.topics = vec![CreatableTopic::default()
        .with_name(name("alices"))
        .with_num_partitions(1)
        .with_replication_factor(-1)];
    let answer = alice.call(&create, 7).expect("create answered");
    assert_eq!(answer.topics[0].error_code, refused);
    let answer = alice
        .call(
            &CreateAclsRequest::default().with_creations(vec![Default::default()]),
            3,
        )
        .expect("create acls answered");
    assert_eq!(
        answer.results[0].error_code,
        ResponseError::ClusterAuthorizationFailed.code()
    );

    // WRITE on orders: produce works, READ does not follow from it.
    as_admin(
        &broker,
        "acls",
        &[
            "add",
            "--principal",
            "User:alice",
            "--operation",
            "write",
            "--topic",
            "orders",
        ],
    );
    assert_eq!(produce_code(&mut alice, "orders"), 0);
    assert_eq!(
        listed_topics(&mut alice),
        ["orders"],
        "WRITE implies DESCRIBE"
    );
    assert_eq!(fetch_code(&mut alice, "orders"), refused);
    assert_eq!(produce_code(&mut alice, "audit"), refused);

    // READ on every topic (User:*), but bob is denied orders: the deny wins.
    as_admin(
        &broker,
        "acls",
        &[
            "add",
            "--principal",
            "User:*",
            "--operation",
            "read",
            "--topic",
            "*",
        ],
    );
    as_admin(
        &broker,
        "acls",
        &[
            "add",
            "--principal",
            "User:bob",
            "--operation",
            "read",
            "--topic",
            "orders",
            "--deny",
        ],
    );
    let mut bob = connect(&broker, "bob:bob-pw");
    assert_eq!(fetch_code(&mut alice, "orders"), 0);
    assert_eq!(fetch_code(&mut bob, "orders"), refused, "deny wins");
    assert_eq!(fetch_code(&mut bob, "audit"), 0);

    // Group commits need READ on the group as well as the topic.
    assert_eq!(
        commit_code(&mut alice, "alices-group", "orders"),
        ResponseError::GroupAuthorizationFailed.code()
    );
    as_admin(
        &broker,
        "acls",
        &[
            "add",
            "--principal",
            "User:alice",
            "--operation",
            "read",
            "--group",
            "alices-",
            "--prefixed",
        ],
    );
    assert_eq!(commit_code(&mut alice, "alices-group", "orders"), 0);
    assert_eq!(
        commit_code(&mut bob, "alices-group", "audit"),
        ResponseError::GroupAuthorizationFailed.code()
    );

    // OffsetDelete needs DELETE on the group and READ on each topic: bob may delete the
    // group's offsets, but not those of orders, which he is denied.
    as_admin(
        &broker,
        "acls",
        &[
            "add",
            "--principal",
            "User:bob",
            "--operation",
            "delete",
            "--group",
            "alices-group",
        ],
    );
    let mut delete_offsets = OffsetDeleteRequest::default();
    delete_offsets.group_id = GroupId("alices-group".to_string().into());
    delete_offsets.topics = ["orders", "audit"]
        .iter()
        .map(|t| {
            OffsetDeleteRequestTopic::default()
                .with_name(name(t))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(0)
                ])
        })
        .collect();
    let answer = bob
        .call(&delete_offsets, 0)
        .expect("offset delete answered");
    assert_eq!(answer.error_code, 0);
    let codes: Vec<i16> = answer
        .topics
        .iter()
        .map(|t| t.partitions[0].error_code)
        .collect();
    assert_eq!(
        codes,
        [refused, 0],
        "orders refused, audit's offsets deleted"
    );
    let answer = alice
        .call(&delete_offsets, 0)
        .expect("offset delete answered");
    assert_eq!(
        answer.error_code,
        ResponseError::GroupAuthorizationFailed.code()
    );

    // DeleteTopics needs DELETE on the topic.
    let mut delete = DeleteTopicsRequest::default();
    delete.topic_names = vec![name("audit")];
    let answer = alice.call(&delete, 5).expect("delete answered");
    assert_eq!(answer.responses[0].error_code, refused);

    // Real clients: confluent-kafka and kafka-python produce, consume in a group and
    // commit as alice, and are refused where she has no ACL.
    as_admin(
        &broker,
        "acls",
        &[
            "add",
            "--principal",
            "User:alice",
            "--operation",
            "create",
            "--cluster",
        ],
    );
    as_admin(
        &broker,
        "acls",
        &[
            "add",
            "--principal",
            "User:alice",
            "--operation",
            "all",
            "--topic",
            "alices-",
            "--prefixed",
        ],
    );
    let args: Vec<String> = [&broker.bootstrap(), "alice", "alice-pw"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    run_script("acl_clients.py", &broker, &args);

    // The ACLs survive a restart and still decide.
    let listed = as_admin(&broker, "acls", &["list", "--principal", "User:bob"]);
    assert!(
        listed.contains("Deny") && listed.contains("orders"),
        "{listed}"
    );
    broker.restart();
    let mut bob = connect(&broker, "bob:bob-pw");
    assert_eq!(fetch_code(&mut bob, "orders"), refused);
    let removed = as_admin(
        &broker,
        "acls",
        &["remove", "--principal", "User:bob", "--deny"],
    );
    assert!(removed.contains("removed: Deny"), "{removed}");
    assert_eq!(fetch_code(&mut bob, "orders"), 0, "the deny is gone");
}

#[test]
fn a_client_certificate_is_the_principal_under_mutual_tls() {
    let dir = scratch_dir();
    let pki = common::pki::pki(dir.path(), "mtls-acl");
    let tls_port = common::broker::free_ports_on(&["127.0.0.1"], 1);
    let tls = format!("127.0.0.1:{tls_port}");
    // The plaintext listener (loopback, no certificate: User:ANONYMOUS) administers;
    // TLS clients are who their certificates say.
    let mut flags = pki.listener_flags(&tls);
    flags.extend([
        "--tls-client-ca".to_string(),
        pki.ca.display().to_string(),
        "--authorizer".into(),
        "acl".into(),
        "--super-users".into(),
        "User:ANONYMOUS".into(),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let broker = Broker::start(&dir.path().join("data"), 1, &flags);
    let at = broker.bootstrap();
    for topic in ["certs", "others"] {
        weir(&["topics", "--bootstrap", &at, "create", topic]);
    }
    weir(&[
        "acls",
        "--bootstrap",
        &at,
        "add",
        "--principal",
        "User:CN=alice",
        "--operation",
        "write",
        "--topic",
        "certs",
    ]);
    let kcat = |rest: &[&str], input: Option<&str>| {
        let ca = format!("ssl.ca.location={}", pki.ca.display());
        let cert = format!("ssl.certificate.location={}", pki.client_cert.display());
        let key = format!("ssl.key.location={}", pki.client_key.display());
        let mut args = vec![
            "-b",
            &tls,
            "-X",
            "security.protocol=ssl",
            "-X",
            &ca,
            "-X",
            &cert,
            "-X",
            &key,
        ];
        args.extend_from_slice(rest);
        common::kcat_try(&args, input)
    };
    let (ok, out) = kcat(&["-t", "certs", "-P"], Some("signed\n"));
    assert!(ok, "User:CN=alice may write certs: {out}");
    let (ok, out) = kcat(&["-t", "others", "-P"], Some("nope\n"));
    assert!(!ok && out.contains("Topic authorization failed"), "{out}");
    let (ok, out) = kcat(&["-t", "certs", "-C", "-e"], None);
    assert!(!ok || !out.contains("signed"), "no READ: {out}");
}
