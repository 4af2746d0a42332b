//! A slow disk for one process: the block I/O throttle of a cgroup (v1 `blkio`) on the
//! device a directory lives on — the loop device of a [`Mount`](super::loop_mount::Mount)
//! in the tests — holding the process's reads and writes to a few per second. The
//! kernel here has no device-mapper (no dm-delay); the throttle is a real slow device as
//! the process sees it: its O_DIRECT writes and reads wait in the block layer. Needs
//! root and the blkio controller; [`Throttle::on`] says why when it cannot.

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

/// Where cgroup v1's blkio controller is mounted.
const BLKIO: &str = "/sys/fs/cgroup/blkio";

/// The throttle files a slow disk sets, each to a rate for the device.
const LIMITS: [&str; 4] = [
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
];

/// A cgroup of its own whose members' I/O to one device can be slowed; removed on drop
/// (its members back in the root group, unthrottled).
pub struct Throttle {
    cgroup: PathBuf,
    device: String,
}

impl Throttle {
    /// A throttle on the device that holds `dir`, named after `name` and this process.
    pub fn on(dir: &Path, name: &str) -> Result<Throttle, String> {
        let dev = std::fs::metadata(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .dev();
        // The kernel's encoding of st_dev (glibc's major()/minor()).
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        let cgroup = PathBuf::from(BLKIO).join(format!("weir-{}-{name}", std::process::id()));
        if !PathBuf::from(BLKIO).join(LIMITS[0]).exists() {
            return Err(format!("no blkio throttle at {BLKIO}"));
        }
        std::fs::create_dir_all(&cgroup).map_err(|e| format!("{}: {e}", cgroup.display()))?;
        Ok(Throttle {
            cgroup,
            device: format!("{major}:{minor}"),
        })
    }

    /// Puts process `pid` (all its threads) in the group.
    pub fn add(&self, pid: u32) -> Result<(), String> {
        self.write("cgroup.procs", &pid.to_string())
    }

    /// Holds the group's I/O to the device to `iops` reads and `iops` writes a second,
    /// and `bytes_per_second` each way.
    pub fn slow(&self, iops: u32, bytes_per_second: u64) -> Result<(), String> {
        for (file, rate) in LIMITS.iter().zip([
            u64::from(iops),
            u64::from(iops),
            bytes_per_second,
            bytes_per_second,
        ]) {
            self.write(file, &format!("{} {rate}", self.device))?;
        }
        Ok(())
    }

    /// Lifts every limit (a rate of 0 removes the device's rule).
    pub fn heal(&self) -> Result<(), String> {
        for file in LIMITS {
            self.write(file, &format!("{} 0", self.device))?;
        }
        Ok(())
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        let path = self.cgroup.join(file);
        std::fs::write(&path, value).map_err(|e| format!("{} <- {value}: {e}", path.display()))
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        let _ = self.heal();
        // A cgroup with members cannot be removed: hand them back to the root group.
        let members = std::fs::read_to_string(self.cgroup.join("cgroup.procs")).unwrap_or_default();
        for pid in members.lines() {
            let _ = std::fs::write(PathBuf::from(BLKIO).join("cgroup.procs"), pid);
        }
        let _ = std::fs::remove_dir(&self.cgroup);
    }
}
