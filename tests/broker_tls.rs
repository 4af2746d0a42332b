//! TLS listeners with real clients: kcat, confluent-kafka and kafka-python over TLS
//! (and mutual TLS), beside the plaintext listener; certificates made by the test; what
//! is not a well-formed, trusted TLS client is dropped without harm to anyone else.

#[allow(dead_code)]
mod common;

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use common::{
    broker::{free_ports_on, Broker},
    interop::run_script,
    kcat_try as kcat,
    loadgen::{run_loadgen, summary},
    pki::{pki, Pki},
    scratch_dir,
};

fn start(dir: &Path, pki: &Pki, client_ca: bool) -> (Broker, u16) {
    let tls_port = free_ports_on(&["127.0.0.1"], 2);
    let mut args = pki.listener_flags(&format!("127.0.0.1:{tls_port}"));
    if client_ca {
        args.push("--tls-client-ca".into());
        args.push(pki.ca.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (Broker::start(&dir.join("data"), 2, &args), tls_port)
}

fn interop(args: &[&str], broker: &Broker) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    run_script("tls_roundtrip.py", broker, &args);
}

#[test]
fn clients_work_over_tls_beside_plaintext_and_garbage_is_dropped() {
    let dir = scratch_dir();
    let pki = pki(dir.path(), "a");
    let (broker, tls_port) = start(dir.path(), &pki, false);
    let tls_bootstrap = format!("127.0.0.1:{tls_port}");
    let ca = pki.ca.display().to_string();
    let ssl = ["-X", "security.protocol=ssl", "-X"];
    let ca_arg = format!("ssl.ca.location={ca}");

    // Each listener's Metadata names its own ports.
    let (ok, tls_md) = kcat(
        &["-b", &tls_bootstrap, ssl[0], ssl[1], ssl[2], &ca_arg, "-L"],
        None,
    );
    assert!(ok, "{tls_md}");
    for s in 0..2 {
        assert!(
            tls_md.contains(&format!("at 127.0.0.1:{}", tls_port + s)),
            "{tls_md}"
        );
    }
    let (ok, plain_md) = kcat(&["-b", &broker.bootstrap(), "-L"], None);
    assert!(
        ok && plain_md.contains(&format!("at 127.0.0.1:{}", broker.port)),
        "{plain_md}"
    );

    let lines: String = (0..300).map(|i| format!("k{i}:v{i}\n")).collect();
    let (ok, out) = kcat(
        &[
            "-b",
            &tls_bootstrap,
            ssl[0],
            ssl[1],
            ssl[2],
            &ca_arg,
            "-t",
            "secure",
            "-P",
            "-K:",
        ],
        Some(&lines),
    );
    assert!(ok, "{out}");
    // What went in over TLS comes out over plaintext, and the other way round.
    let (ok, out) = kcat(
        &["-b", &broker.bootstrap(), "-t", "secure", "-C", "-e", "-q"],
        None,
    );
    assert!(ok && out.lines().count() == 300, "{out}");

    // Garbage, a plaintext Kafka request and a half handshake on the TLS port: each is
    // dropped, and the broker keeps serving.
    for junk in [
        &b"\x16\x03\x01\x00\x05garbage garbage garbage"[..],
        &[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff][..],
        &b"\x16\x03\x01"[..],
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", tls_port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let _ = s.write_all(junk);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        assert!(
            !answer.windows(4).any(|w| w == [0, 0, 0, 1]),
            "no Kafka answer on the TLS port to {junk:?}"
        );
    }
    let (ok, out) = kcat(
        &["-b", &tls_bootstrap, ssl[0], ssl[1], ssl[2], &ca_arg, "-L"],
        None,
    );
    assert!(ok, "still serving TLS: {out}");

    // A client that does not trust the broker's CA fails; one that does works.
    let other = pki_other(dir.path());
    let (ok, _) = kcat(
        &[
            "-b",
            &tls_bootstrap,
            ssl[0],
            ssl[1],
            ssl[2],
            &format!("ssl.ca.location={}", other.display()),
            "-L",
            "-m",
            "5",
        ],
        None,
    );
    assert!(!ok, "a client with another CA must not connect");

    interop(&[&tls_bootstrap, &ca, "py-secure"], &broker);

    // loadgen drives the TLS listener: every message produced is consumed, no errors.
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
                "--topic",
                "lg-secure",
                "--partitions",
                "2",
                "--messages",
                "20000",
                "--out",
                out_dir,
            ],
            &broker,
            0,
        );
        let s = summary(&out);
        assert_eq!(s["errors"], 0, "{s}");
        let key = if mode == "produce" {
            "produce"
        } else {
            "consume"
        };
        assert_eq!(s[key]["messages"], 20000, "{s}");
    }
}

fn pki_other(dir: &Path) -> PathBuf {
    pki(dir, "other").ca
}

#[test]
fn mutual_tls_requires_a_client_certificate_from_the_ca() {
    let dir = scratch_dir();
    let stranger = pki(dir.path(), "stranger");
    let pki = pki(dir.path(), "m");
    let (broker, tls_port) = start(dir.path(), &pki, true);
    let tls_bootstrap = format!("127.0.0.1:{tls_port}");
    let base = |cert: Option<(&Path, &Path)>| {
        let mut args = vec![
            "-b".to_string(),
            tls_bootstrap.clone(),
            "-X".into(),
            "security.protocol=ssl".into(),
            "-X".into(),
            format!("ssl.ca.location={}", pki.ca.display()),
        ];
        if let Some((c, k)) = cert {
            args.push("-X".into());
            args.push(format!("ssl.certificate.location={}", c.display()));
            args.push("-X".into());
            args.push(format!("ssl.key.location={}", k.display()));
        }
        args.extend(["-L".to_string(), "-m".into(), "5".into()]);
        args
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        kcat(&refs, None)
    };
    let (ok, out) = run(base(None));
    assert!(!ok, "no client certificate: refused ({out})");
    let (ok, out) = run(base(Some((&stranger.client_cert, &stranger.client_key))));
    assert!(!ok, "a certificate from another CA: refused ({out})");
    let (ok, out) = run(base(Some((&pki.client_cert, &pki.client_key))));
    assert!(ok, "the CA's client certificate: served ({out})");
    interop(
        &[
            &tls_bootstrap,
            &pki.ca.display().to_string(),
            "mtls",
            &pki.client_cert.display().to_string(),
            &pki.client_key.display().to_string(),
        ],
        &broker,
    );
}

#[test]
fn bad_tls_settings_stop_the_start_with_a_message() {
    let dir = scratch_dir();
    let bad = pki(dir.path(), "bad");
    let missing = dir.path().join("missing.pem");
    for (args, why) in [
        (
            vec![
                "--tls-listen",
                "127.0.0.1:1",
                "--tls-cert",
                bad.server_cert.to_str().expect("utf-8"),
            ],
            "--tls-listen, --tls-cert and --tls-key together",
        ),
        (
            vec![
                "--tls-listen",
                "127.0.0.1:19999",
                "--tls-cert",
                missing.to_str().expect("utf-8"),
                "--tls-key",
                bad.server_key.to_str().expect("utf-8"),
            ],
            "missing.pem",
        ),
        (
            vec![
                "--tls-listen",
                "127.0.0.1:19999",
                "--tls-cert",
                bad.server_key.to_str().expect("utf-8"),
                "--tls-key",
                bad.server_key.to_str().expect("utf-8"),
            ],
            "no certificate",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_weir"))
            .arg("serve")
            .args(["--config", common::broker::SHARED_PROFILE])
            .args([
                "--data-dir",
                dir.path().join("data").to_str().expect("utf-8"),
            ])
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
            .args(&args)
            .output()
            .expect("run weir");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(text.contains(why), "{args:?}: expected {why:?} in {text}");
    }
}

/// 33,000 plaintext connections one after another, none over TLS, then TLS still
/// serves. Both listeners' accept loops once shared a task: each plaintext connection
/// woke it and re-polled the waiting TLS accept, glommio kept a waker clone per poll,
/// and connection 32,767 overflowed the task's reference count and killed the shard
/// (reproduced with a release broker; found by `benches/security_ab.sh`).
#[test]
fn a_flood_of_plaintext_connections_leaves_the_tls_listener_serving() {
    let dir = scratch_dir();
    let pki = pki(dir.path(), "flood");
    let tls_port = free_ports_on(&["127.0.0.1"], 1);
    let tls_bootstrap = format!("127.0.0.1:{tls_port}");
    let flags = pki.listener_flags(&tls_bootstrap);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let broker = Broker::start(&dir.path().join("data"), 1, &flags);
    // One at a time, so that every connection finds the accept waiting.
    let out = run_loadgen(
        &[
            "connect",
            "--bootstrap",
            &broker.bootstrap(),
            "--connections",
            "33000",
            "--concurrency",
            "1",
            "--duration",
            "300s",
        ],
        &broker,
        0,
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("33000 connections") && printed.contains(" 0 errors"),
        "{printed}"
    );
    let ca = format!("ssl.ca.location={}", pki.ca.display());
    let (ok, md) = kcat(
        &[
            "-b",
            &tls_bootstrap,
            "-X",
            "security.protocol=ssl",
            "-X",
            &ca,
            "-L",
            "-m",
            "10",
        ],
        None,
    );
    assert!(ok, "TLS after the flood: {md}\n{}", broker.log());
}
