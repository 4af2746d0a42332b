//! Runs the real `weir` binary on loopback for integration tests: free ports, a scratch
//! data directory on the project disk, and a kill on drop.

use std::{
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// The test suite's broker settings: `tuning/shared.toml`, the lighter setting for a
/// machine shared with other work (shards sleep when idle instead of polling), since
/// tests run several brokers and clients on two cores.
pub const SHARED_PROFILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tuning/shared.toml");

/// True when `addr` answers an ApiVersions request. A TCP connect alone is not enough:
/// after a SIGKILL the dead process's listening socket can linger for a few
/// milliseconds (io_uring releases its files asynchronously) and accept connections.
pub fn answers_api_versions(addr: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(100)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    // ApiVersions v0: key 18, version 0, correlation id 1, null client id.
    let request = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    let mut header = [0u8; 8];
    s.write_all(&request).is_ok()
        && s.read_exact(&mut header).is_ok()
        && header[4..8] == [0, 0, 0, 1]
}

/// One HTTP exchange with the server at `addr` (the broker's metrics endpoint): sends
/// `request` as it is, closes the sending side (the request is all there is, so a
/// partial one reads as the end of the stream), and returns everything the server sends
/// until it closes, or until `timeout` passes without a byte.
pub fn http_exchange(
    addr: impl std::net::ToSocketAddrs,
    request: &[u8],
    timeout: Duration,
) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(timeout))?;
    s.write_all(request)?;
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// A running broker process.
pub struct Broker {
    child: Option<Child>,
    /// Shard 0's port.
    pub port: u16,
    /// Number of shards.
    pub shards: usize,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The core each shard is pinned to.
    cores: Vec<usize>,
    extra: Vec<String>,
    /// The failure probe the process is started with (`WEIR_FAILURE_PROBE`), if any.
    pub failure_probe: Option<String>,
}

/// A free loopback port for a test's own listener (the metrics endpoint).
pub fn free_port() -> u16 {
    free_ports(1)
}

/// `n` consecutive free loopback ports, below Linux's ephemeral range: a connect to a
/// port in that range with nothing listening can connect to itself and fake readiness.
fn free_ports(n: usize) -> u16 {
    free_ports_on(&["127.0.0.1"], n)
}

/// `n` consecutive ports free on every one of `ips` (the hosts of a test cluster).
pub fn free_ports_on(ips: &[&str], n: usize) -> u16 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seed = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    for _ in 0..1000 {
        let i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = 20_000 + ((seed.wrapping_add(i * 104_729)) % 12_000) as u16;
        if ips
            .iter()
            .all(|ip| (0..n).all(|k| TcpListener::bind((*ip, port + k as u16)).is_ok()))
        {
            return port;
        }
    }
    panic!("no free ports");
}

impl Broker {
    /// Starts a broker with `shards` shards on fresh ports in `data_dir`, with extra
    /// command-line flags, and waits until every shard accepts connections.
    pub fn start(data_dir: &Path, shards: usize, extra: &[&str]) -> Broker {
        let cores: Vec<usize> = (0..shards).collect();
        Broker::start_on(data_dir, &cores, extra)
    }

    /// Starts a broker with one shard pinned to each of `cores`, like [`start`](Self::start).
    pub fn start_on(data_dir: &Path, cores: &[usize], extra: &[&str]) -> Broker {
        Broker::start_armed(data_dir, cores, extra, None)
    }

    /// Starts a broker like [`start_on`](Self::start_on) with `failure_probe` armed:
    /// it kills itself when it reaches that point (`weir::failure_probe`).
    pub fn start_armed(
        data_dir: &Path,
        cores: &[usize],
        extra: &[&str],
        failure_probe: Option<&str>,
    ) -> Broker {
        let mut b = Broker {
            child: None,
            port: free_ports(cores.len()),
            shards: cores.len(),
            data_dir: data_dir.to_path_buf(),
            cores: cores.to_vec(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            failure_probe: failure_probe.map(String::from),
        };
        b.spawn();
        b
    }

    fn spawn(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .arg("serve")
            .args(["--config", SHARED_PROFILE])
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--shards", &self.shards.to_string()])
            .args([
                "--cores",
                &self
                    .cores
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--log-level", "info"])
            // Brokers of parallel tests must not contend for the default metrics port.
            .args(if self.extra.iter().any(|a| a == "--metrics-listen") {
                &[][..]
            } else {
                &["--metrics-listen", "127.0.0.1:0"][..]
            })
            .args(&self.extra)
            .env(
                weir::failure_probe::FAILURE_PROBE_ENV,
                self.failure_probe.as_deref().unwrap_or(""),
            )
            .stdout(self.log_file())
            .stderr(self.log_file())
            .spawn()
            .expect("start weir");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        for s in 0..self.shards {
            let addr = SocketAddr::from(([127, 0, 0, 1], self.port + s as u16));
            while !answers_api_versions(addr) {
                assert!(
                    Instant::now() < deadline,
                    "broker did not start listening on {addr}"
                );
                if let Some(status) = self
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    panic!("broker exited at start: {status}");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    fn log_file(&self) -> Stdio {
        let path = self.data_dir.with_extension("log");
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_or(Stdio::null(), Stdio::from)
    }

    /// The broker's log so far (stdout and stderr), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.with_extension("log")).unwrap_or_default()
    }

    /// `127.0.0.1:PORT` of shard 0, the bootstrap address.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Runs the broker with one shard on each of `cores` from its next start (a host
    /// whose shard count changed); its ports stay (shard 0 keeps the first).
    pub fn set_cores(&mut self, cores: &[usize]) {
        self.cores = cores.to_vec();
        self.shards = cores.len();
    }

    /// Kills the broker with SIGKILL (a crash) and starts it again on the same ports.
    pub fn crash_and_restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Stops the broker with SIGTERM and returns once it exited; panics unless it
    /// exited with status 0 within 20 s.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let status = super::terminate(&mut child, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("broker did not stop within 20 s"));
        assert!(
            status.success(),
            "clean stop exits 0, got {status}; log:\n{}",
            self.log()
        );
    }

    /// Starts the broker again, stopping it first (SIGTERM) if it runs.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// The process id, to signal it.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// True while the process is running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Kills the broker with SIGKILL (a crash) and waits for it; [`restart`](Self::restart)
    /// starts it again.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}
