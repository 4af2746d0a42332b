//! SIGINT and SIGTERM: the broker stops cleanly instead of dying mid-write. The signals
//! are blocked in every thread (the executors inherit the mask) and one thread waits
//! for them with `sigwait`, so no handler ever runs on a reactor thread.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

/// Blocks SIGINT and SIGTERM in the calling thread (call before spawning any other) and
/// starts a thread that sets the returned flag when one arrives. A second signal exits
/// at once, for an operator who does not want to wait.
pub fn stop_on_signals() -> std::io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    // SAFETY: plain libc calls on a zeroed, locally owned signal set.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        set
    };
    let flag = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("weir-signals".into())
        .spawn(move || loop {
            let mut signal: libc::c_int = 0;
            // SAFETY: `set` is a valid signal set owned by this closure.
            if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
                continue;
            }
            if flag.swap(true, Ordering::AcqRel) {
                tracing::warn!(signal, "second signal: exiting without a clean stop");
                std::process::exit(1);
            }
            tracing::info!(signal, "stopping: closing partitions and flushing");
        })?;
    Ok(stop)
}
