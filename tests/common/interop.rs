//! The Python Kafka clients the interop tests drive: kafka-python 3 and confluent-kafka,
//! installed into `target/pyenv` by `tests/run-all.sh` at pinned versions, and the
//! scripts in `tests/interop`.

use std::{path::PathBuf, process::Command};

use super::broker::Broker;

/// The virtualenv's Python.
pub fn python() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/pyenv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run `bash tests/run-all.sh`, which installs the Python clients",
        p.display()
    );
    p
}

/// A script in `tests/interop`.
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(name)
}

/// Starts a script from `tests/interop` with `args` in the background (for at most
/// `seconds`), its output discarded: clients that run beside faults (librdkafka reports
/// every refused reconnect).
pub fn spawn_script(name: &str, args: &[&str], seconds: u32) -> std::process::Child {
    spawn_script_logged(name, args, seconds, None)
}

/// [`spawn_script`], its output written to `log` (a file, replaced) when given: for a
/// failing client to say why.
pub fn spawn_script_logged(
    name: &str,
    args: &[&str],
    seconds: u32,
    log: Option<&std::path::Path>,
) -> std::process::Child {
    let out = || match log {
        Some(path) => std::fs::File::create(path)
            .map_or(std::process::Stdio::null(), std::process::Stdio::from),
        None => std::process::Stdio::null(),
    };
    Command::new("timeout")
        .arg(seconds.to_string())
        .arg(python())
        .arg(script(name))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(out())
        .spawn()
        .expect("start a python client")
}

/// Runs a script from `tests/interop` with `args` and fails with its output and the
/// broker's log if it fails.
pub fn run_script(name: &str, broker: &Broker, args: &[String]) {
    run_script_logged(name, args, || format!("broker log:\n{}", broker.log()));
}

/// Runs a script from `tests/interop` with `args`; if it fails, fails with its output
/// and what `logs` gives (the logs of the brokers involved).
pub fn run_script_logged(name: &str, args: &[String], logs: impl FnOnce() -> String) {
    let out = Command::new("timeout")
        .arg("180")
        .arg(python())
        .arg(script(name))
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{name} failed:\n{}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        logs()
    );
    print!("{}", String::from_utf8_lossy(&out.stdout));
}
