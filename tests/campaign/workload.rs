//! The campaign's workload, every client writing what it did to a file of its own for
//! the checker: Kafka's `VerifiableProducer` (idempotent, acks=all, a fixed rate) and
//! two `VerifiableConsumer` group members on the checked topic, as Kafka's own system
//! tests run them; confluent-kafka's producer and committing consumer
//! (`kill_loop.py`) on a second topic; and a sampler of the group's committed offsets as
//! the coordinator answers them, for "committed offsets never go backwards".

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::Child,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::Duration,
};

use crate::common::{cluster::run_weir, interop::spawn_script_logged, jvm::kafka_tool, terminate};

/// The topic Kafka's verifiable clients work on.
pub const VERIFIED: &str = "verified";
/// The topic confluent-kafka's clients work on.
pub const LEDGER: &str = "ledger";
/// The topic the full-disk fault writes a burst to.
pub const BALLAST: &str = "ballast";
/// The group the verifiable consumers form.
pub const GROUP: &str = "campaign";
/// The verifiable consumers.
pub const CONSUMERS: usize = 2;
/// Messages a second the verifiable producer sends.
const RATE: &str = "300";
/// How long a client may take to close once the faults are over: longer is a hang.
const CLOSE_MAX: Duration = Duration::from_secs(90);

/// Where each client writes what it did, under one directory.
pub struct Files(pub PathBuf);

impl Files {
    /// The verifiable producer's JSON lines.
    pub fn producer(&self) -> PathBuf {
        self.0.join("producer.jsonl")
    }
    /// Verifiable consumer `n`'s JSON lines.
    pub fn consumer(&self, n: usize) -> PathBuf {
        self.0.join(format!("consumer-{n}.jsonl"))
    }
    /// The committed-offset samples: `unix_ms partition offset` per line.
    pub fn commits(&self) -> PathBuf {
        self.0.join("committed-samples.txt")
    }
    /// A file of `kill_loop.py`'s (its acks, commits, records seen, logs, stop file).
    pub fn ledger(&self, name: &str) -> String {
        self.0.join(format!("ledger-{name}")).display().to_string()
    }
}

/// The running clients.
pub struct Workload {
    files: Files,
    producer: Child,
    consumers: Vec<Child>,
    ledger: [Child; 2],
    sampling: Arc<AtomicBool>,
    sampler: JoinHandle<()>,
}

/// A Kafka tool writing its JSON lines to `out` and its log beside it.
fn tool(class: &str, args: &[&str], out: &Path) -> Child {
    let file = |path: PathBuf| std::fs::File::create(&path).expect("client output file");
    kafka_tool(class)
        .args(args)
        .env("JAVA_TOOL_OPTIONS", "-Xmx256m -XX:+UseSerialGC")
        .stdout(file(out.to_path_buf()))
        .stderr(file(out.with_extension("log")))
        .spawn()
        .unwrap_or_else(|e| panic!("start {class}: {e}"))
}

impl Workload {
    /// Starts every client against `bootstrap` (the topics exist), writing into `files`,
    /// each allowed to run for `seconds` at most.
    pub fn start(bootstrap: &str, files: Files, seconds: u32) -> Workload {
        let config = files.0.join("producer.properties");
        // Idempotent acks=all, and patient: a record is retried through any fault of the
        // campaign rather than given up (the tool itself sets no retries).
        std::fs::write(
            &config,
            "enable.idempotence=true\nacks=all\nretries=2147483647\n\
             delivery.timeout.ms=600000\nrequest.timeout.ms=5000\nmax.block.ms=600000\n",
        )
        .expect("producer config");
        let producer = tool(
            "org.apache.kafka.tools.VerifiableProducer",
            &[
                "--bootstrap-server",
                bootstrap,
                "--topic",
                VERIFIED,
                "--throughput",
                RATE,
                "--acks",
                "-1",
                // Keyed, so each partition gets its share whatever the partitioner
                // thinks of its speed: a partition's gap in acks is its unavailability.
                "--repeating-keys",
                "30",
                "--command-config",
                &config.display().to_string(),
            ],
            &files.producer(),
        );
        let consumers = (0..CONSUMERS)
            .map(|n| {
                tool(
                    "org.apache.kafka.tools.VerifiableConsumer",
                    &[
                        "--bootstrap-server",
                        bootstrap,
                        "--topic",
                        VERIFIED,
                        "--group-id",
                        GROUP,
                        "--session-timeout",
                        "10000",
                        "--reset-policy",
                        "earliest",
                        "--verbose",
                    ],
                    &files.consumer(n),
                )
            })
            .collect();
        let (stop, acked, commits, seen) = (
            files.ledger("stop"),
            files.ledger("acked.txt"),
            files.ledger("commits.txt"),
            files.ledger("seen.txt"),
        );
        let ledger = [
            spawn_script_logged(
                "kill_loop.py",
                &["produce", bootstrap, LEDGER, &stop, &acked, "200"],
                seconds,
                Some(Path::new(&files.ledger("producer.log"))),
            ),
            spawn_script_logged(
                "kill_loop.py",
                &["consume", bootstrap, LEDGER, &stop, &commits, &seen],
                seconds,
                Some(Path::new(&files.ledger("consumer.log"))),
            ),
        ];
        let sampling = Arc::new(AtomicBool::new(true));
        let sampler = {
            let (bootstrap, path, on) = (bootstrap.to_string(), files.commits(), sampling.clone());
            std::thread::spawn(move || sample_commits(&bootstrap, &path, &on))
        };
        Workload {
            files,
            producer,
            consumers,
            ledger,
            sampling,
            sampler,
        }
    }

    /// Whether every client is still running (a client that gave up is a finding).
    pub fn running(&mut self) -> Result<(), String> {
        let mut all: Vec<(&str, &mut Child)> = vec![("VerifiableProducer", &mut self.producer)];
        all.extend(self.consumers.iter_mut().map(|c| ("VerifiableConsumer", c)));
        let [p, c] = &mut self.ledger;
        all.extend([("kill_loop.py produce", p), ("kill_loop.py consume", c)]);
        for (name, child) in all {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("{name} exited during the campaign: {status}"));
            }
        }
        Ok(())
    }

    /// Stops the clients as an operator would: the producers first (closing, they send
    /// what they hold), then the consumers once they have had `drain` to read the rest;
    /// each must close within a bound. Returns the files to check, or what hung.
    pub fn stop(mut self, drain: Duration) -> Result<Files, String> {
        let mut failures = Vec::new();
        if terminate(&mut self.producer, CLOSE_MAX).is_none() {
            failures.push(format!(
                "VerifiableProducer did not close within {CLOSE_MAX:?}"
            ));
        }
        std::fs::write(self.files.ledger("stop"), b"").expect("stop file");
        std::thread::sleep(drain);
        for (n, consumer) in self.consumers.iter_mut().enumerate() {
            if terminate(consumer, CLOSE_MAX).is_none() {
                failures.push(format!(
                    "VerifiableConsumer {n} did not close within {CLOSE_MAX:?}: a hung group"
                ));
            }
        }
        for (role, child) in ["producer", "consumer"].iter().zip(&mut self.ledger) {
            match wait_within(child, CLOSE_MAX) {
                Some(status) if status.success() => {}
                other => failures.push(format!(
                    "kill_loop.py's {role} ended {other:?}:\n{}",
                    tail(Path::new(&self.files.ledger(&format!("{role}.log"))), 20)
                )),
            }
        }
        // One last sample, after every commit: the committed offsets as they stay.
        std::thread::sleep(Duration::from_millis(600));
        self.sampling.store(false, Ordering::Relaxed);
        let _ = self.sampler.join();
        if failures.is_empty() {
            Ok(self.files)
        } else {
            Err(failures.join("\n"))
        }
    }
}

/// Waits for `child` at most `within`; kills it after that.
fn wait_within(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every 500 ms while `on`, the group's committed offsets on the checked topic as
/// `weir groups describe` gets them from the coordinator, one `unix_ms partition
/// offset` line each; a sample that fails (the coordinator moving) is skipped.
fn sample_commits(bootstrap: &str, path: &Path, on: &AtomicBool) {
    let mut out = std::fs::File::create(path).expect("samples file");
    // Each sample ends after `on` turns false, so the last one follows the last commit.
    let mut last = false;
    while !last {
        last = !on.load(Ordering::Relaxed);
        // The first host that answers (one may be down or cut off).
        let answer = bootstrap.split(',').find_map(|host| {
            let (ok, text) = run_weir(&["groups", "--bootstrap", host, "describe", GROUP]);
            ok.then_some(text)
        });
        let at = crate::history::unix_ms();
        if let Some(text) = answer {
            for line in text.lines() {
                let f: Vec<&str> = line.split('\t').collect();
                if f.len() == 6 && f[0] == VERIFIED && f[2] != "-" {
                    let _ = writeln!(out, "{at} {} {}", f[1], f[2]);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The last `lines` lines of a client's output file (read from its end: the files of a
/// long campaign are large).
pub fn tail(path: &Path, lines: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let from = len.saturating_sub(lines as u64 * 400);
    let mut text = String::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_string(&mut text).is_err() {
        return String::new();
    }
    // A read from the middle starts inside a line: drop that part.
    let all: Vec<&str> = text.lines().skip(usize::from(from > 0)).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
