//! A small ext4 image mounted through a loop device, for disk-full tests. Needs root
//! and loop devices; `mount_small_ext4` says why when it cannot.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// A mounted image, unmounted (lazily) on drop.
pub struct Mount(pub PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        // Lazily: glommio closes dropped files on its next I/O cycle, which a finished
        // executor never runs, so the mount can still be busy until the test process
        // exits. A lazy unmount detaches it now and frees it then.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Creates a `mib` MiB ext4 image in `dir` and mounts it at `dir/mnt`.
pub fn mount_small_ext4(dir: &Path, mib: u64) -> Result<Mount, String> {
    let image = dir.join("disk.img");
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).map_err(|e| e.to_string())?;
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(mib << 20))
        .map_err(|e| e.to_string())?;
    let run = |cmd: &mut Command| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{cmd:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    run(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-m", "0"])
        .arg(&image))?;
    run(Command::new("mount")
        .args(["-o", "loop"])
        .arg(&image)
        .arg(&mnt))?;
    Ok(Mount(mnt))
}
