//! The JVM clients the interop tests drive: Apache Kafka's Java client, tools, Streams
//! and Connect, built from `tests/jvm` (a Maven project with pinned versions) into
//! `target/jvm` by `tests/run-all.sh`. One JVM runs every case of a topology through
//! JUnit's console launcher, against brokers the Rust test started.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The cases' class path: the compiled cases and every jar Maven resolved for them.
fn classpath() -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/jvm");
    let jars = std::fs::read_to_string(root.join("classpath.txt")).unwrap_or_else(|_| {
        panic!(
            "{}/classpath.txt is missing: run `bash tests/run-all.sh`, which builds tests/jvm",
            root.display()
        )
    });
    format!("{}:{}", root.join("classes").display(), jars.trim())
}

/// A Kafka tool's `main` in a JVM of its own, as `kafka-run-class.sh CLASS` runs it
/// (for the tools run beside faults: Verifiable*, TransactionalMessageCopier).
pub fn kafka_tool(class: &str) -> Command {
    let mut command = Command::new("java");
    command.arg("-cp").arg(classpath()).arg(class);
    command
}

/// Runs Kafka tool `class` (its `main`) through `bootstrap` with `args`, echoing its
/// output for the test log; returns its exit success and its stdout and stderr.
pub fn run_kafka_tool(class: &str, bootstrap: &str, args: &[&str]) -> (bool, String) {
    let out = kafka_tool(class)
        .args(["--bootstrap-server", bootstrap])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {class}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{class} {args:?}: {text}");
    (out.status.success(), text)
}

/// Where the cases run and what they may assume of it.
pub struct Target<'a> {
    /// The bootstrap servers.
    pub bootstrap: &'a str,
    /// The replication factor the cases give new topics.
    pub replication_factor: u16,
    /// A properties file of client security settings (SASL_SSL), if any.
    pub client_config: Option<&'a Path>,
}

/// The `main` of program `class` (in `weir.compat`, one that runs beside faults the
/// Rust test injects) in a JVM of its own, told `target` as the cases are.
pub fn compat_main(class: &str, target: &Target) -> Command {
    let mut command = Command::new("java");
    told(&mut command, target).arg(format!("weir.compat.{class}"));
    command
}

/// Adds to a `java` command line the class path and the system properties that tell
/// the cases (`weir.compat.Weir`) about `target`.
fn told<'c>(command: &'c mut Command, target: &Target) -> &'c mut Command {
    command
        .arg("-cp")
        .arg(classpath())
        .arg(format!("-Dweir.bootstrap={}", target.bootstrap))
        .arg(format!("-Dweir.rf={}", target.replication_factor));
    if let Some(config) = target.client_config {
        command.arg(format!("-Dweir.client.config={}", config.display()));
    }
    command
}

/// A JVM's output without the clients' INFO logging and stack frames: what failed.
pub fn failures_of(text: &str) -> String {
    text.lines()
        .filter(|l| !l.contains(" INFO ") && !l.trim_start().starts_with("at "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs the JUnit classes `classes` (in `weir.compat`) against `target` in one JVM, for
/// at most `seconds`, with its report written to `report`; fails with the failures and
/// what `logs` gives (the brokers' logs) when any case fails.
pub fn run_cases(
    target: &Target,
    classes: &[&str],
    report: &Path,
    seconds: u32,
    logs: impl FnOnce() -> String,
) {
    let mut command = Command::new("timeout");
    command.arg(seconds.to_string()).arg("java");
    told(&mut command, target).args([
        "org.junit.platform.console.ConsoleLauncher",
        "execute",
        "--disable-banner",
        "--disable-ansi-colors",
        "--details=tree",
        "--fail-if-no-tests",
    ]);
    for class in classes {
        command.arg(format!("--select-class=weir.compat.{class}"));
    }
    let out = command.output().expect("run java");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::write(report, &text);
    if !out.status.success() {
        // The tree and the failures, without the clients' INFO logging and deep stacks.
        let summary = failures_of(&text);
        panic!(
            "JVM cases failed ({}; full report {}):\n{summary}\n{}",
            out.status,
            report.display(),
            logs()
        );
    }
}
