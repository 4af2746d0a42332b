//! Several real `weir serve` hosts on this machine as one cluster: host `n` listens on
//! loopback address `127.0.0.n` (the same ports on each) — or, in a cluster started on a
//! [`Network`], on its own namespace's address, where its link can be cut — voters run
//! the controller, and each host keeps its data directory and log under one scratch
//! directory. Hosts can be killed (SIGKILL), paused (SIGSTOP) and restarted; everything
//! is killed on drop. Cluster II's replication tests build on this.

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use super::{
    broker::{answers_api_versions, free_ports_on},
    netns::Network,
};

/// How long a host may take to register and serve.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One host of a test cluster.
pub struct Host {
    /// Its node id.
    pub id: u32,
    /// The address it listens on: `127.0.0.<id>`, or its namespace's.
    ip: String,
    /// The network namespace it runs in, if any.
    namespace: Option<String>,
    /// Shard 0's port.
    pub port: u16,
    /// Its shards.
    pub shards: usize,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// Where its output goes (beside its data directory unless a test moves it: off a
    /// disk the test fills, say).
    pub log_path: PathBuf,
    /// A voter (runs the controller) or a broker only.
    pub voter: bool,
    controller_port: u16,
    voters: String,
    extra: Vec<String>,
    /// The failure probe the process is started with (`WEIR_FAILURE_PROBE`), if any.
    pub failure_probe: Option<String>,
    child: Option<Child>,
}

impl Host {
    /// The address it listens on.
    pub fn ip(&self) -> String {
        self.ip.clone()
    }

    /// Shard 0's address, a bootstrap address for clients.
    pub fn bootstrap(&self) -> String {
        format!("{}:{}", self.ip(), self.port)
    }

    /// Its controller's address (voters only).
    pub fn controller(&self) -> String {
        format!("{}:{}", self.ip(), self.controller_port)
    }

    /// The `weir serve` command line of this host.
    pub fn command(&self) -> Command {
        let weir = env!("CARGO_BIN_EXE_weir");
        let mut c = match &self.namespace {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, weir]);
                c
            }
            None => Command::new(weir),
        };
        c.arg("serve")
            .args(["--config", super::broker::SHARED_PROFILE])
            .args(["--node-id", &self.id.to_string()])
            .args(["--controller-quorum-voters", &self.voters])
            .args(["--listen", &self.bootstrap()])
            .args(["--advertise", &self.ip()])
            .args(["--shards", &self.shards.to_string()])
            .args(["--cores", &cores(self.shards)])
            .arg("--data-dir")
            .arg(&self.data_dir);
        // No metrics endpoint unless the test asks for one.
        if !self.extra.iter().any(|a| a == "--metrics-listen") {
            c.args(["--metrics-listen", "off"]);
        }
        // Short sessions make failover tests quick, unless the test sets its own.
        if !self.extra.iter().any(|a| a == "--session-timeout") {
            c.args(["--session-timeout", "2s"]);
        }
        c.args(&self.extra)
            .env(
                weir::failure_probe::FAILURE_PROBE_ENV,
                self.failure_probe.as_deref().unwrap_or(""),
            )
            .stdout(self.log_file())
            .stderr(self.log_file());
        c
    }

    fn log_file(&self) -> Stdio {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_or(Stdio::null(), Stdio::from)
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Starts the process (without waiting for it to serve).
    pub fn spawn(&mut self) {
        assert!(self.child.is_none(), "host {} is running", self.id);
        self.child = Some(self.command().spawn().expect("start weir"));
    }

    /// Waits until every shard answers (a controller-only voter: until its controller
    /// listens); panics with the log if the process exits.
    pub fn wait_serving(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        if self.extra.iter().any(|a| a == "controller") {
            let addr: SocketAddr = self.controller().parse().expect("addr");
            while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "controller {addr} did not listen"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            return;
        }
        for s in 0..self.shards {
            let addr: SocketAddr = format!("{}:{}", self.ip(), self.port + s as u16)
                .parse()
                .expect("addr");
            while !answers_api_versions(addr) {
                if let Some(status) = self
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    panic!("host {} exited at start: {status}\n{}", self.id, self.log());
                }
                assert!(
                    Instant::now() < deadline,
                    "host {} did not serve {addr} within {START_TIMEOUT:?}\n{}",
                    self.id,
                    self.log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Kills the process with SIGKILL and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the process as an operator would (SIGTERM: it closes its partitions, making
    /// everything appended durable) and waits for it; SIGKILL after 30 s.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if super::terminate(&mut child, Duration::from_secs(30)).is_none() {
            panic!("host {} did not stop within 30s\n{}", self.id, self.log());
        }
    }

    /// Adds `flags` to its `weir serve` command line (from its next start).
    pub fn add_flags(&mut self, flags: &[&str]) {
        self.extra.extend(flags.iter().map(|f| f.to_string()));
    }

    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether its process has exited (reaping it if so) or was never started.
    pub fn exited(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => false,
            Some(_) => {
                self.child = None;
                true
            }
            None => true,
        }
    }

    /// Sends `signal` (e.g. `STOP`, `CONT`) to the process.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{signal} {pid}");
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_ref() {
            // A paused process cannot die of SIGKILL until it is continued.
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
        }
        self.kill();
    }
}

/// `0,1,…`: shard `n` on core `n` modulo the machine's cores.
fn cores(shards: usize) -> String {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..shards)
        .map(|s| (s % cpus).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The sum of every sample of metric `name` whose labels contain each of `labels`
/// (`key="value"` strings) in the exposition `GET /metrics` at `addr` answers; `None`
/// when no sample matches or the endpoint does not answer.
pub fn scrape_sum(addr: &str, name: &str, labels: &[&str]) -> Option<f64> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: test\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let samples: Vec<f64> = text
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                && labels.iter().all(|want| l.contains(want))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!samples.is_empty()).then(|| samples.iter().sum())
}

/// Runs the `weir` CLI (at most 60 s); returns whether it succeeded and its output.
pub fn run_weir(args: &[&str]) -> (bool, String) {
    let out: Output = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .expect("run weir");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A running test cluster.
pub struct Cluster {
    /// Its hosts, by position (host `n` is `hosts[n - 1]` while ids are dense).
    pub hosts: Vec<Host>,
    /// Where the data directories and logs are.
    pub dir: tempfile::TempDir,
    /// The namespaces the hosts run in, if started on a [`Network`] (dropped after the
    /// hosts are killed).
    pub network: Option<Network>,
    voters: String,
    port: u16,
    controller_port: u16,
}

impl Cluster {
    /// Starts `voters` voter hosts (ids 1..=voters) of `shards` shards each and waits
    /// until all of them serve.
    pub fn start(voters: u32, shards: usize) -> Cluster {
        Cluster::start_with(voters, shards, &[])
    }

    /// [`start`](Self::start), with the voters in `controller_only` running the
    /// controller alone (`--process-roles controller`: no Kafka listener).
    pub fn start_with(voters: u32, shards: usize, controller_only: &[u32]) -> Cluster {
        Cluster::start_configured(voters, shards, |id| {
            if controller_only.contains(&id) {
                vec!["--process-roles".into(), "controller".into()]
            } else {
                Vec::new()
            }
        })
    }

    /// [`start`](Self::start), with `extra(id)` added to host `id`'s flags.
    pub fn start_configured(
        voters: u32,
        shards: usize,
        extra: impl Fn(u32) -> Vec<String>,
    ) -> Cluster {
        Cluster::start_on(None, voters, shards, |host| host.extra = extra(host.id))
    }

    /// [`start`](Self::start), with every host in its own namespace of `network` (which
    /// must have at least `voters` hosts) if one is given, and each host set up by
    /// `setup` (its flags, its data directory) before it starts.
    pub fn start_on(
        network: Option<Network>,
        voters: u32,
        shards: usize,
        setup: impl Fn(&mut Host),
    ) -> Cluster {
        let ips: Vec<String> = (1..=8).map(|n| format!("127.0.0.{n}")).collect();
        let ip_refs: Vec<&str> = ips.iter().map(String::as_str).collect();
        // (A fresh namespace has every port free.)
        let port = free_ports_on(&ip_refs, 4);
        let controller_port = free_ports_on(&ip_refs, 1);
        let mut cluster = Cluster {
            hosts: Vec::new(),
            dir: super::scratch_dir(),
            network,
            voters: String::new(),
            port,
            controller_port,
        };
        cluster.voters = (1..=voters)
            .map(|id| format!("{id}@{}:{controller_port}", cluster.ip_of(id)))
            .collect::<Vec<_>>()
            .join(",");
        for id in 1..=voters {
            let mut host = cluster.new_host(id, shards, true);
            setup(&mut host);
            cluster.hosts.push(host);
        }
        for h in &mut cluster.hosts {
            h.spawn();
        }
        for h in &mut cluster.hosts {
            h.wait_serving();
        }
        cluster
    }

    /// Host `id`'s address.
    fn ip_of(&self, id: u32) -> String {
        match &self.network {
            Some(n) => n.ip(id),
            None => format!("127.0.0.{id}"),
        }
    }

    fn new_host(&self, id: u32, shards: usize, voter: bool) -> Host {
        Host {
            id,
            ip: self.ip_of(id),
            namespace: self.network.as_ref().map(|n| n.namespace(id)),
            port: self.port,
            shards,
            data_dir: self.dir.path().join(format!("host-{id}")),
            log_path: self.dir.path().join(format!("host-{id}.log")),
            voter,
            controller_port: self.controller_port,
            voters: self.voters.clone(),
            extra: Vec::new(),
            failure_probe: None,
            child: None,
        }
    }

    /// A host with this cluster's voter list that is not started, for tests that start
    /// it themselves (with odd flags, or expecting a refusal).
    pub fn unstarted_host(&self, id: u32, shards: usize, extra: &[&str]) -> Host {
        let mut h = self.new_host(id, shards, false);
        h.extra = extra.iter().map(|s| s.to_string()).collect();
        h
    }

    /// Adds broker-only host `id` and waits until it serves.
    pub fn add_broker(&mut self, id: u32, shards: usize) -> &mut Host {
        let mut h = self.new_host(id, shards, false);
        h.spawn();
        h.wait_serving();
        self.hosts.push(h);
        self.hosts.last_mut().expect("just pushed")
    }

    /// Host `id`.
    pub fn host(&mut self, id: u32) -> &mut Host {
        self.hosts
            .iter_mut()
            .find(|h| h.id == id)
            .expect("no such host")
    }

    /// Runs the `weir` CLI; returns whether it succeeded and its output.
    pub fn weir(&self, args: &[&str]) -> (bool, String) {
        run_weir(args)
    }

    /// `weir cluster status --json`, asked of the first running voter that answers.
    pub fn status(&self) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            for h in self.hosts.iter().filter(|h| h.voter && h.child.is_some()) {
                let (ok, out) = self.weir(&[
                    "cluster",
                    "status",
                    "--controller",
                    &h.controller(),
                    "--json",
                ]);
                if ok {
                    return serde_json::from_str(&out).expect("status JSON");
                }
            }
            assert!(Instant::now() < deadline, "no controller answered status");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The controller leader's host id.
    pub fn leader(&self) -> u32 {
        self.status()["leader"].as_u64().expect("leader") as u32
    }

    /// Every running host's `kcat -L` answer without its first line (which names the
    /// broker that answered), once they all agree; panics after `within`.
    pub fn converged_metadata(&self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let answers: Vec<String> = self
                .hosts
                .iter()
                .filter(|h| h.child.is_some() && !h.extra.iter().any(|a| a == "controller"))
                .map(|h| {
                    let out = Command::new("timeout")
                        .args(["20", "kcat", "-b", &h.bootstrap(), "-L"])
                        .output()
                        .expect("kcat");
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    text.lines().skip(1).collect::<Vec<_>>().join("\n")
                })
                .collect();
            if !answers[0].is_empty() && answers.iter().all(|a| *a == answers[0]) {
                return answers[0].clone();
            }
            assert!(
                Instant::now() < deadline,
                "hosts disagree on metadata after {within:?}: {answers:#?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Creates `name` with `partitions` partitions of `replication_factor` replicas through
/// `bootstrap` with `weir topics create`.
pub fn create_topic(bootstrap: &str, name: &str, partitions: u32, replication_factor: u32) {
    let (ok, out) = run_weir(&[
        "topics",
        "--bootstrap",
        bootstrap,
        "create",
        name,
        "--partitions",
        &partitions.to_string(),
        "--replication-factor",
        &replication_factor.to_string(),
    ]);
    assert!(ok, "creating {name}: {out}");
}

/// The node `weir groups describe` names as the group's coordinator; panics with the
/// output when it names none.
pub fn coordinator_node(describe: &str) -> i64 {
    describe
        .split("coordinator ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no coordinator in {describe}"))
}
