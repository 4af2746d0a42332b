//! SASL logins with real clients: kcat, confluent-kafka, kafka-python and loadgen log in
//! with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN over TLS (SASL_SSL) and plaintext
//! (SASL_PLAINTEXT); users are managed over the wire with `weir users` and survive a
//! restart; each refusal (no login, a wrong password, an unknown user, a mechanism not
//! offered, a bad credential) closes the connection or names the problem; in a cluster
//! every host knows the same users and followers log in to replicate.

#[allow(dead_code)]
mod common;

use std::{
    io::Read,
    net::TcpStream,
    process::Command,
    time::{Duration, Instant},
};

use common::{
    broker::{free_ports_on, Broker},
    cluster::Cluster,
    interop::run_script,
    kcat_try,
    loadgen::{run_loadgen, summary},
    pki::pki,
    scratch_dir,
};
use kafka_protocol::messages::{
    alter_user_scram_credentials_request::ScramCredentialUpsertion,
    AlterUserScramCredentialsRequest, ApiVersionsRequest, MetadataRequest,
};
use weir_client::{
    blocking::Connection,
    sasl::{SaslLogin, SaslMechanism},
    scram::Mechanism,
    ClientError,
};

const ADMIN: &str = "admin:admin-secret";

fn weir(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .expect("run weir");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// kcat's flags to log in as `user` with `mechanism` over SASL_PLAINTEXT.
fn sasl_args<'a>(bootstrap: &'a str, mechanism: &'a str, user: &'a str) -> Vec<String> {
    let (name, password) = user.split_once(':').expect("NAME:PASSWORD");
    [
        "-b",
        bootstrap,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        &format!("sasl.mechanisms={mechanism}"),
        "-X",
        &format!("sasl.username={name}"),
        "-X",
        &format!("sasl.password={password}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn kcat_as(
    bootstrap: &str,
    mechanism: &str,
    user: &str,
    rest: &[&str],
    input: Option<&str>,
) -> (bool, String) {
    let mut args = sasl_args(bootstrap, mechanism, user);
    args.extend(rest.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    kcat_try(&refs, input)
}

fn login(mechanism: SaslMechanism, user: &str) -> SaslLogin {
    SaslLogin::parse(mechanism, user).expect("NAME:PASSWORD")
}

/// True once the broker closed `stream` (a read returns end of stream within 5 s).
fn closed_by_broker(stream: &mut TcpStream) -> bool {
    closed_within(stream, Duration::from_secs(5))
}

/// True once the broker closed `stream` (a read returns end of stream within `limit`).
fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    stream.set_read_timeout(Some(limit)).expect("timeout");
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(0))
}

#[test]
fn clients_log_in_over_sasl_ssl_with_scram_and_plain() {
    let dir = scratch_dir();
    let pki = pki(dir.path(), "sasl");
    let tls_port = free_ports_on(&["127.0.0.1"], 2);
    let tls_bootstrap = format!("127.0.0.1:{tls_port}");
    let mut flags = pki.listener_flags(&tls_bootstrap);
    flags.extend(
        [
            "--sasl-mechanisms",
            "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "--sasl-user",
            ADMIN,
        ]
        .map(String::from),
    );
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let broker = Broker::start(&dir.path().join("data"), 2, &flags);
    let ca = pki.ca.display().to_string();
    let (name, password) = ADMIN.split_once(':').expect("admin");
    for (mechanism, topic) in [("SCRAM-SHA-512", "scram512"), ("PLAIN", "plain")] {
        let args: Vec<String> = [&tls_bootstrap, &ca, topic, mechanism, name, password]
            .iter()
            .map(|s| s.to_string())
            .collect();
        run_script("sasl_roundtrip.py", &broker, &args);
    }
    // SCRAM-SHA-256 over the plaintext listener (SASL_PLAINTEXT), with kcat.
    let plain = broker.bootstrap();
    let lines: String = (0..50).map(|i| format!("k{i}:v{i}\n")).collect();
    let (ok, out) = kcat_as(
        &plain,
        "SCRAM-SHA-256",
        ADMIN,
        &["-t", "k256", "-P", "-K:"],
        Some(&lines),
    );
    assert!(ok, "{out}");
    let (ok, out) = kcat_as(
        &plain,
        "SCRAM-SHA-256",
        ADMIN,
        &["-t", "k256", "-C", "-e", "-q"],
        None,
    );
    assert!(ok && out.lines().count() == 50, "{out}");

    // loadgen drives SASL_SSL with SCRAM-SHA-512: everything produced is consumed.
    let out = dir.path().join("lg");
    let out_dir = out.to_str().expect("utf-8");
    for mode in ["produce", "consume"] {
        run_loadgen(
            &[
                mode,
                "--bootstrap",
                &tls_bootstrap,
                "--tls-ca",
                &ca,
                "--sasl-user",
                ADMIN,
                "--topic",
                "lg-sasl",
                "--partitions",
                "2",
                "--messages",
                "10000",
                "--out",
                out_dir,
            ],
            &broker,
            0,
        );
        let s = summary(&out);
        assert_eq!(s["errors"], 0, "{s}");
        assert_eq!(s[mode]["messages"], 10000, "{s}");
    }
}

#[test]
fn refusals_close_the_connection_and_users_are_managed_over_the_wire() {
    let dir = scratch_dir();
    let data = dir.path().join("data");
    let mut broker = Broker::start(
        &data,
        1,
        &[
            "--sasl-mechanisms",
            "SCRAM-SHA-512,PLAIN",
            "--sasl-user",
            ADMIN,
        ],
    );
    let at = broker.bootstrap();

    // Without a login, ApiVersions is answered and anything else closes the connection.
    let mut raw = TcpStream::connect(&at).expect("connect");
    weir_client::blocking::call_on(&mut raw, &ApiVersionsRequest::default(), 3, 1, "t")
        .expect("ApiVersions before login");
    let refused = weir_client::blocking::call_on(&mut raw, &MetadataRequest::default(), 12, 2, "t");
    assert!(
        refused.is_err(),
        "Metadata before login must not be answered"
    );
    assert!(closed_by_broker(&mut raw));

    // A client that stops in the middle of its login is closed after 10 s, though the
    // idle timeout is ten minutes.
    let mut stalled = TcpStream::connect(&at).expect("connect");
    let handshake = login(SaslMechanism::Scram(Mechanism::Sha512), ADMIN).handshake();
    weir_client::blocking::call_on(&mut stalled, &handshake, 1, 1, "t").expect("handshake");
    let started = Instant::now();
    assert!(
        closed_within(&mut stalled, Duration::from_secs(20)),
        "a stalled login stays open"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(15),
        "{waited:?}"
    );

    // A wrong password and an unknown user get the same answer; the broker then closes.
    for (mechanism, user) in [
        (
            SaslMechanism::Scram(Mechanism::Sha512),
            "admin:wrong-secret",
        ),
        (SaslMechanism::Plain, "admin:wrong-secret"),
        (
            SaslMechanism::Scram(Mechanism::Sha512),
            "nobody:admin-secret",
        ),
        (SaslMechanism::Plain, "nobody:admin-secret"),
    ] {
        let mut c = Connection::open(&at, "sasl-test").expect("connect");
        match c.log_in(&login(mechanism, user)) {
            Err(ClientError::Sasl(why)) => assert!(
                why.contains("error 58") && why.contains("invalid user name or password"),
                "{user} with {mechanism:?}: {why}"
            ),
            other => panic!("{user} with {mechanism:?} logged in: {other:?}"),
        }
        assert!(
            c.call(&ApiVersionsRequest::default(), 3).is_err(),
            "closed after a failed login"
        );
    }
    // A mechanism the broker does not offer is refused and named.
    let (ok, out) = kcat_as(&at, "SCRAM-SHA-256", ADMIN, &["-L"], None);
    assert!(!ok && out.contains("SCRAM-SHA-512,PLAIN"), "{out}");
    // The refusals are logged with who and where from, never the password.
    let log = broker.log();
    assert!(
        log.contains("SASL login refused") && log.contains("user=\"nobody\""),
        "{log}"
    );
    assert!(!log.contains("wrong-secret"), "a password reached the log");

    // Users over the wire: created by the admin, listed, logging in, deleted.
    let admin = ["--bootstrap", &at, "--sasl-user", ADMIN];
    let run = |rest: &[&str]| {
        let mut args = vec!["users"];
        args.extend_from_slice(&admin);
        args.extend_from_slice(rest);
        weir(&args)
    };
    let (ok, out) = run(&["create", "bob", "--password", "bob-secret"]);
    assert!(ok, "{out}");
    let (ok, listed) = run(&["list"]);
    assert!(
        ok && listed.contains("bob") && listed.contains("SCRAM-SHA-512 (4096 iterations)"),
        "{listed}"
    );
    let lines: String = (0..20).map(|i| format!("v{i}\n")).collect();
    let (ok, out) = kcat_as(
        &at,
        "SCRAM-SHA-512",
        "bob:bob-secret",
        &["-t", "bobs", "-P"],
        Some(&lines),
    );
    assert!(ok, "{out}");
    let (ok, out) = kcat_as(
        &at,
        "PLAIN",
        "bob:bob-secret",
        &["-t", "bobs", "-C", "-e", "-q"],
        None,
    );
    assert!(ok && out.lines().count() == 20, "{out}");
    // Without a login the command says what to do.
    let (ok, out) = weir(&["users", "--bootstrap", &at, "list"]);
    assert!(!ok && out.contains("--sasl-user"), "{out}");

    // A credential below Kafka's minimum iterations is refused, naming why.
    let mut c = Connection::open_as(&at, "sasl-test", Some(&login(SaslMechanism::Plain, ADMIN)))
        .expect("admin logs in");
    let mut bad = AlterUserScramCredentialsRequest::default();
    let mut upsert = ScramCredentialUpsertion::default();
    upsert.name = "weak".to_string().into();
    upsert.mechanism = Mechanism::Sha256.kafka_type();
    upsert.iterations = 100;
    upsert.salt = vec![1u8; 16].into();
    upsert.salted_password = vec![2u8; 32].into();
    bad.upsertions.push(upsert);
    let answer = c.call(&bad, 0).expect("answered");
    assert_eq!(
        answer.results[0].error_code,
        kafka_protocol::ResponseError::UnacceptableCredential.code()
    );
    assert!(answer.results[0]
        .error_message
        .as_ref()
        .is_some_and(|m| m.contains("iterations")));

    // Users survive a restart (the broker keeps only salted keys).
    broker.stop();
    assert!(
        !std::fs::read_to_string(data.join("topics.json"))
            .expect("registry")
            .contains("bob-secret"),
        "a password was stored"
    );
    broker.restart();
    let (ok, out) = kcat_as(
        &broker.bootstrap(),
        "SCRAM-SHA-512",
        "bob:bob-secret",
        &["-L"],
        None,
    );
    assert!(ok, "bob after a restart: {out}");
    let (ok, out) = weir(&[
        "users",
        "--bootstrap",
        &broker.bootstrap(),
        "--sasl-user",
        ADMIN,
        "delete",
        "bob",
    ]);
    assert!(ok, "{out}");
    let (ok, out) = kcat_as(
        &broker.bootstrap(),
        "SCRAM-SHA-512",
        "bob:bob-secret",
        &["-L"],
        None,
    );
    assert!(!ok, "a deleted user logged in: {out}");
}

/// Waits until `check` holds, for at most `within`.
fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Partition 0 of `topic` as `weir topics describe` shows it through `bootstrap`,
/// logged in as the admin: its leader node and ISR (empty while it fails).
fn leader_and_isr(bootstrap: &str, topic: &str) -> (i64, Vec<i64>) {
    let (ok, out) = weir(&[
        "topics",
        "--bootstrap",
        bootstrap,
        "--sasl-user",
        ADMIN,
        "describe",
        topic,
    ]);
    let row = out.lines().nth(2).filter(|_| ok).unwrap_or_default();
    let f: Vec<&str> = row.split('\t').collect();
    if f.len() < 5 {
        return (-1, Vec::new());
    }
    let isr = f[4].split(',').filter_map(|n| n.parse().ok()).collect();
    (f[1].parse().unwrap_or(-1), isr)
}

#[test]
fn every_host_knows_the_users_and_acls_and_followers_log_in() {
    // ACLs enforced; the admin (whom followers log in as) is a super user.
    let mut cluster = Cluster::start_configured(3, 1, |_| {
        [
            "--sasl-mechanisms",
            "SCRAM-SHA-512",
            "--sasl-user",
            ADMIN,
            "--authorizer",
            "acl",
            "--super-users",
            "User:admin",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    });
    let b1 = cluster.host(1).bootstrap();
    let b2 = cluster.host(2).bootstrap();
    // A user created through host 1 logs in on host 2.
    let (ok, out) = weir(&[
        "users",
        "--bootstrap",
        &b1,
        "--sasl-user",
        ADMIN,
        "create",
        "carol",
        "--password",
        "carol-secret",
    ]);
    assert!(ok, "{out}");
    eventually(Duration::from_secs(10), "carol on host 2", || {
        kcat_as(&b2, "SCRAM-SHA-512", "carol:carol-secret", &["-L"], None).0
    });
    // An RF 2 topic: its follower logs in to the leader and copies every record, so
    // they survive the leader's host.
    let (ok, out) = weir(&[
        "topics",
        "--bootstrap",
        &b1,
        "--sasl-user",
        ADMIN,
        "create",
        "replicated",
        "--partitions",
        "1",
        "--replication-factor",
        "2",
    ]);
    assert!(ok, "{out}");
    let lines: String = (0..100).map(|i| format!("v{i}\n")).collect();
    // Carol may not write until an ACL made through host 1 lets her, on every host.
    let produce_on_2 = || {
        kcat_as(
            &b2,
            "SCRAM-SHA-512",
            "carol:carol-secret",
            &["-t", "replicated", "-P", "-X", "acks=all"],
            Some("denied\n"),
        )
    };
    let (ok, out) = produce_on_2();
    assert!(!ok && out.contains("Topic authorization failed"), "{out}");
    let (ok, out) = weir(&[
        "acls",
        "--bootstrap",
        &b1,
        "--sasl-user",
        ADMIN,
        "add",
        "--principal",
        "User:carol",
        "--operation",
        "all",
        "--topic",
        "replicated",
    ]);
    assert!(ok, "{out}");
    let (ok, out) = kcat_as(
        &b1,
        "SCRAM-SHA-512",
        "carol:carol-secret",
        &["-t", "replicated", "-P", "-X", "acks=all"],
        Some(&lines),
    );
    assert!(ok, "{out}");
    let mut leader = -1;
    eventually(Duration::from_secs(20), "both replicas in sync", || {
        let (l, isr) = leader_and_isr(&b1, "replicated");
        leader = l;
        isr.len() == 2
    });
    let leader_host = (leader / 1024) as u32;
    let survivor = (1..=3)
        .find(|&h| h != leader_host)
        .map(|h| cluster.host(h).bootstrap())
        .expect("another host");
    cluster.host(leader_host).kill();
    eventually(
        Duration::from_secs(20),
        "all 100 records on the follower",
        || {
            let (ok, out) = kcat_as(
                &survivor,
                "SCRAM-SHA-512",
                "carol:carol-secret",
                &["-t", "replicated", "-C", "-e", "-q"],
                None,
            );
            ok && out.lines().count() == 100
        },
    );
}
