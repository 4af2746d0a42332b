//! The faults the campaign injects into a running three-host cluster, each healed before
//! it returns, and the wait for the cluster to be whole again between them.

use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use crate::{
    common::{cluster::Cluster, kcat_try, partitions, rng::Rng, slow_disk::Throttle},
    history::{unix_ms, Event},
    workload::{BALLAST, LEDGER, VERIFIED},
};

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// kill -9 of a partition leader's host, restarted a moment later.
    Kill,
    /// SIGSTOP of a partition leader's host for longer than the session timeout.
    Pause,
    /// A partition leader's host cut off from every other host and from the clients.
    CutLeader,
    /// The controller leader's host (a minority of the voters) cut off.
    CutController,
    /// Every host stopped (SIGTERM) and started again, one after another.
    RollingRestart,
    /// The disk of the host on the small disk filled to the last block, then freed.
    FullDisk,
    /// That host's disk slowed to a few operations a second, then restored.
    SlowDisk,
}

impl Fault {
    /// Every kind, in the order the campaign's CI version runs them.
    pub const ALL: [Fault; 7] = [
        Fault::Kill,
        Fault::Pause,
        Fault::CutLeader,
        Fault::CutController,
        Fault::RollingRestart,
        Fault::FullDisk,
        Fault::SlowDisk,
    ];

    /// Its name in the history and the figures.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::CutLeader => "cut-leader",
            Fault::CutController => "cut-controller",
            Fault::RollingRestart => "rolling-restart",
            Fault::FullDisk => "full-disk",
            Fault::SlowDisk => "slow-disk",
        }
    }
}

/// The host whose data directory is on a small disk of its own, for the disk faults.
pub struct Disk {
    /// Its id.
    pub host: u32,
    /// Where its disk is mounted.
    pub mount: PathBuf,
    /// A throttle on that disk, if the kernel offers one.
    pub throttle: Option<Throttle>,
}

/// Injects faults.
pub struct Nemesis {
    disk: Option<Disk>,
    /// How long a pause, a cut, a full or slow disk lasts (the session timeout is 3 s).
    hold: Duration,
}

/// How long the cluster may take to be whole again after a fault.
const SETTLE_MAX: Duration = Duration::from_secs(90);

impl Nemesis {
    /// A nemesis for a cluster whose `disk` host (if any) can have disk faults.
    pub fn new(disk: Option<Disk>, hold: Duration) -> Nemesis {
        Nemesis { disk, hold }
    }

    /// Whether this machine lets it inject `fault` (the disk faults need a loop mount,
    /// the slow disk a blkio throttle too).
    pub fn can(&self, fault: Fault) -> bool {
        match fault {
            Fault::FullDisk => self.disk.is_some(),
            Fault::SlowDisk => self.disk.as_ref().is_some_and(|d| d.throttle.is_some()),
            _ => true,
        }
    }

    /// Injects `fault` (its victim chosen with `rng`) and heals it.
    pub fn inject(&mut self, cluster: &mut Cluster, fault: Fault, rng: &mut Rng) -> Event {
        let mut event = Event {
            fault: fault.name(),
            host: None,
            partitions: Vec::new(),
            start_ms: unix_ms(),
            heal_ms: 0,
            note: String::new(),
        };
        let hold = self.hold;
        match fault {
            Fault::Kill | Fault::Pause | Fault::CutLeader => {
                let victim = leader_host(cluster, rng);
                event.host = Some(victim);
                event.partitions = led_by(cluster, victim);
                event.start_ms = unix_ms();
                match fault {
                    Fault::Kill => {
                        cluster.host(victim).kill();
                        std::thread::sleep(Duration::from_millis(1000 + rng.below(3000)));
                        event.heal_ms = unix_ms();
                        cluster.host(victim).spawn();
                        cluster.host(victim).wait_serving();
                    }
                    Fault::Pause => {
                        cluster.host(victim).signal("STOP");
                        std::thread::sleep(hold);
                        event.heal_ms = unix_ms();
                        cluster.host(victim).signal("CONT");
                    }
                    _ => cut_for(cluster, victim, hold, &mut event),
                }
            }
            Fault::CutController => {
                let victim = cluster.leader();
                event.host = Some(victim);
                event.partitions = led_by(cluster, victim);
                event.start_ms = unix_ms();
                cut_for(cluster, victim, hold, &mut event);
            }
            Fault::RollingRestart => {
                for id in 1..=3 {
                    cluster.host(id).stop();
                    cluster.host(id).spawn();
                    cluster.host(id).wait_serving();
                    if let Err(why) = settle(cluster) {
                        event.note = format!("after restarting host {id}: {why}");
                        break;
                    }
                }
                event.heal_ms = unix_ms();
            }
            Fault::FullDisk => {
                let disk = self.disk.as_ref().expect("a disk for the full-disk fault");
                event.host = Some(disk.host);
                event.partitions = led_by(cluster, disk.host);
                event.start_ms = unix_ms();
                let full = |c: &mut Cluster| c.host(disk.host).log().matches("os error 28").count();
                let before = full(cluster);
                let fillers = fill(&disk.mount);
                // The logs' zero-filled space ahead holds the campaign's records for
                // minutes; a burst on a topic of its own needs new blocks at once.
                ballast(cluster);
                std::thread::sleep(hold * 2);
                event.note = format!(
                    "{} writes refused for want of space",
                    full(cluster) - before
                );
                for f in &fillers {
                    let _ = std::fs::remove_file(f);
                }
                event.heal_ms = unix_ms();
                let host = disk.host;
                if cluster.host(host).exited() {
                    event.note += &format!("; host {host} exited on the full disk, restarted");
                    cluster.host(host).spawn();
                    cluster.host(host).wait_serving();
                }
            }
            Fault::SlowDisk => {
                let disk = self.disk.as_ref().expect("a disk for the slow-disk fault");
                let throttle = disk.throttle.as_ref().expect("a throttle");
                event.host = Some(disk.host);
                event.partitions = led_by(cluster, disk.host);
                let pid = cluster.host(disk.host).pid().expect("the slow host runs");
                throttle.add(pid).expect("throttle the host");
                event.start_ms = unix_ms();
                // About what a failing disk or a saturated volume gives: 20 operations
                // and 2 MiB a second each way.
                throttle.slow(20, 2 << 20).expect("slow the disk");
                std::thread::sleep(hold * 2);
                throttle.heal().expect("heal the disk");
                event.heal_ms = unix_ms();
            }
        }
        event
    }
}

/// Cuts `victim` off for `hold`, then joins it again.
fn cut_for(cluster: &mut Cluster, victim: u32, hold: Duration, event: &mut Event) {
    let network = cluster.network.as_ref().expect("a cluster on a network");
    network.cut(victim);
    std::thread::sleep(hold);
    event.heal_ms = unix_ms();
    network.heal(victim);
}

/// A running host's client address other than `not`'s.
fn via(cluster: &mut Cluster, not: Option<u32>) -> String {
    let id = (1..=3)
        .find(|&id| Some(id) != not && cluster.host(id).pid().is_some())
        .expect("a running host");
    cluster.host(id).bootstrap()
}

/// The host leading a partition of the checked topic picked with `rng`.
fn leader_host(cluster: &mut Cluster, rng: &mut Rng) -> u32 {
    let via = via(cluster, None);
    let leaders = partitions::leaders(&via, VERIFIED);
    let leader = leaders[rng.index(leaders.len())];
    u32::try_from(leader / 1024).expect("a led partition")
}

/// The checked topic's partitions `host` leads.
fn led_by(cluster: &mut Cluster, host: u32) -> Vec<i32> {
    let via = via(cluster, None);
    partitions::leaders(&via, VERIFIED)
        .iter()
        .enumerate()
        .filter(|(_, l)| **l / 1024 == i64::from(host))
        .map(|(p, _)| p as i32)
        .collect()
}

/// Writes 8 MiB to the ballast topic (refusals and all: the point is the disk).
fn ballast(cluster: &mut Cluster) {
    let via = via(cluster, None);
    let line = format!("{}\n", "b".repeat(1023));
    let _ = kcat_try(&["-b", &via, "-P", "-t", BALLAST], Some(&line.repeat(8192)));
}

/// Fills the file system holding `dir` to within a few blocks with fallocate'd files;
/// returns them.
fn fill(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut fillers = Vec::new();
    for n in 0..8 {
        let Some(free) = available_bytes(dir) else {
            break;
        };
        if free < 256 << 10 {
            break;
        }
        let path = dir.join(format!("filler-{n}"));
        let size = free - (128 << 10);
        let done = Command::new("fallocate")
            .args(["-l", &size.to_string()])
            .arg(&path)
            .status()
            .is_ok_and(|s| s.success());
        fillers.push(path);
        if !done {
            break;
        }
    }
    fillers
}

/// Bytes free for unprivileged use on the file system holding `dir` (`df`).
fn available_bytes(dir: &std::path::Path) -> Option<u64> {
    let out = Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(dir)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

/// Waits until every host runs and serves and every partition of both topics has a
/// leader and all three replicas in sync; says what is missing after [`SETTLE_MAX`].
pub fn settle(cluster: &mut Cluster) -> Result<(), String> {
    for id in 1..=3 {
        if cluster.host(id).exited() {
            let log = cluster.host(id).log();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            return Err(format!(
                "host {id} exited on its own; its log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    let deadline = Instant::now() + SETTLE_MAX;
    for topic in [VERIFIED, LEDGER] {
        loop {
            let via = via(cluster, None);
            let rows = partitions::describe(&via, topic);
            if !rows.is_empty() && rows.iter().all(|r| r.leader >= 0 && r.isr.len() == 3) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{topic} not wholly in sync {SETTLE_MAX:?} after the fault: {rows:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    Ok(())
}
