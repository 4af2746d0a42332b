//! The controller channel in mutual TLS: three hosts whose controllers and agents
//! present certificates one CA signed form a cluster and serve; `weir cluster` with
//! such a certificate reads and changes it; a plain connection, a certificate another
//! CA signed, and a caller that does not trust the controllers' CA are each refused,
//! and the change they asked for (a drain) never happens.

#[allow(dead_code)]
mod common;

use std::time::Duration;

use common::{
    cluster::{create_topic, run_weir, Cluster},
    kcat,
    pki::{pki, Pki},
};

/// `--controller-tls-*` flags naming `cert`, `key` and `ca`.
fn tls_flags(cert: &std::path::Path, key: &std::path::Path, ca: &std::path::Path) -> Vec<String> {
    [
        ("--controller-tls-cert", cert),
        ("--controller-tls-key", key),
        ("--controller-tls-ca", ca),
    ]
    .into_iter()
    .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
    .collect()
}

/// `weir cluster <args> --controller <controller>` with `tls`'s flags.
fn cluster_cli(args: &[&str], controller: &str, tls: &[String]) -> (bool, String) {
    let mut all: Vec<&str> = vec!["cluster"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--controller", controller]);
    all.extend(tls.iter().map(String::as_str));
    run_weir(&all)
}

#[test]
fn only_hosts_with_a_certificate_the_ca_signed_reach_the_controller() {
    let dir = common::scratch_dir();
    let trusted: Pki = pki(dir.path(), "hosts");
    let rogue: Pki = pki(dir.path(), "rogue");
    let host_flags = tls_flags(&trusted.server_cert, &trusted.server_key, &trusted.ca);
    // Every host's agent registers through its controllers' TLS before it serves.
    let mut cluster = Cluster::start_configured(3, 1, |_| host_flags.clone());
    cluster.converged_metadata(Duration::from_secs(15));
    let b1 = cluster.host(1).bootstrap();
    create_topic(&b1, "guarded", 3, 3);
    kcat(
        &["-b", &b1, "-P", "-t", "guarded", "-p", "0"],
        Some("a\nb\n"),
    );
    let read = kcat(
        &["-b", &b1, "-C", "-t", "guarded", "-p", "0", "-e", "-q"],
        None,
    );
    assert_eq!(read, "a\nb\n");

    let controller = cluster.host(1).controller();
    let operator = tls_flags(&trusted.client_cert, &trusted.client_key, &trusted.ca);
    let (ok, out) = cluster_cli(&["status", "--json"], &controller, &operator);
    assert!(ok, "a trusted operator reads the status: {out}");
    let status: serde_json::Value = serde_json::from_str(&out).expect("status JSON");
    assert_eq!(status["hosts"].as_array().map(Vec::len), Some(3), "{out}");

    // Each refused: no TLS at all; a certificate another CA signed; a caller that does
    // not trust the controllers' certificate.
    let refused = [
        ("plain TCP", Vec::new()),
        (
            "a certificate another CA signed",
            tls_flags(&rogue.client_cert, &rogue.client_key, &trusted.ca),
        ),
        (
            "a caller trusting another CA",
            tls_flags(&rogue.client_cert, &rogue.client_key, &rogue.ca),
        ),
    ];
    for (what, flags) in &refused {
        let (ok, out) = cluster_cli(&["drain", "--node", "1"], &controller, flags);
        assert!(!ok, "{what}: a drain was accepted: {out}");
        let (ok, out) = cluster_cli(&["status"], &controller, flags);
        assert!(!ok, "{what}: the status was given: {out}");
    }
    let (ok, out) = cluster_cli(&["status", "--json"], &controller, &operator);
    assert!(ok, "{out}");
    let status: serde_json::Value = serde_json::from_str(&out).expect("status JSON");
    for host in status["hosts"].as_array().expect("hosts") {
        assert_eq!(
            host["record"]["draining"], false,
            "a refused caller's drain happened: {host}"
        );
    }
    let log = cluster.host(1).log();
    assert!(
        log.contains("controller connection refused"),
        "the refusals are logged:\n{log}"
    );
    // A trusted operator's change goes through.
    let (ok, out) = cluster_cli(&["drain", "--node", "1"], &controller, &operator);
    assert!(ok, "{out}");
    let (ok, out) = cluster_cli(&["drain", "--node", "1", "--undo"], &controller, &operator);
    assert!(ok, "{out}");
}
