//! Fault injection for the storage engine's own unit tests: a named I/O step can be
//! made to fail with a chosen OS error, because a real disk cannot be made to return
//! EIO on demand here (no device-mapper), or to stall, as a device flush does for
//! hundreds of milliseconds now and then. Compiled to nothing outside `cfg(test)`.

use std::io;

#[cfg(test)]
thread_local! {
    static ARMED: std::cell::RefCell<Vec<(&'static str, i32)>> = const { std::cell::RefCell::new(Vec::new()) };
    static STALLS: std::cell::RefCell<Vec<(&'static str, std::time::Duration)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Makes the next `step` on this thread take `stall` longer.
#[cfg(test)]
pub fn arm_stall(step: &'static str, stall: std::time::Duration) {
    STALLS.with(|a| a.borrow_mut().push((step, stall)));
}

/// The injected stall for `step`, if one is armed (consumed by this call).
#[cfg(test)]
pub fn stall(step: &'static str) -> Option<std::time::Duration> {
    STALLS.with(|a| take(&mut a.borrow_mut(), step))
}

/// Removes and returns the first fault armed for `step`.
#[cfg(test)]
fn take<T>(armed: &mut Vec<(&'static str, T)>, step: &str) -> Option<T> {
    let i = armed.iter().position(|(s, _)| *s == step)?;
    Some(armed.remove(i).1)
}

/// Outside tests nothing ever stalls.
#[cfg(not(test))]
#[inline(always)]
pub fn stall(_step: &'static str) -> Option<std::time::Duration> {
    None
}

/// Makes the next `step` on this thread fail with OS error `errno`.
#[cfg(test)]
pub fn arm(step: &'static str, errno: i32) {
    ARMED.with(|a| a.borrow_mut().push((step, errno)));
}

/// Whether an error is armed for `step` and not yet injected.
#[cfg(test)]
pub fn is_armed(step: &'static str) -> bool {
    ARMED.with(|a| a.borrow().iter().any(|(s, _)| *s == step))
}

/// The injected error for `step`, if one is armed (consumed by this call).
#[cfg(test)]
pub fn check(step: &'static str) -> Option<io::Error> {
    ARMED
        .with(|a| take(&mut a.borrow_mut(), step))
        .map(io::Error::from_raw_os_error)
}

/// Outside tests nothing is ever injected.
#[cfg(not(test))]
#[inline(always)]
pub fn check(_step: &'static str) -> Option<io::Error> {
    None
}
