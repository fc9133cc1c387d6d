//! Running code inside another network namespace. Only the network namespace
//! is entered (setns on one thread), never the mount namespace: `ip netns
//! exec` remounts /sys, which would hide the bpffs pins.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::thread::JoinHandle;

use anyhow::{Context, Result};

/// Starts `f` on a new thread that has joined the network namespace at
/// `path` (a /run/netns entry or /proc/PID/ns/net). Sockets `f` creates live
/// there.
pub fn spawn_in<T, F>(path: &Path, f: F) -> Result<JoinHandle<std::io::Result<T>>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let ns = File::open(path)
        .with_context(|| format!("opening network namespace {}", path.display()))?;
    Ok(std::thread::spawn(move || {
        // SAFETY: a valid namespace fd; setns affects only this thread.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(f())
    }))
}

/// [`spawn_in`] and wait for the result.
pub fn run_in<T, F>(path: &Path, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let handle = spawn_in(path, f)?;
    let result = handle
        .join()
        .map_err(|_| anyhow::anyhow!("thread in {} panicked", path.display()))?;
    result.with_context(|| format!("entering network namespace {}", path.display()))
}

/// Runs `f` on the current thread while it is inside the network namespace
/// at `path`, then returns the thread to the namespace it was in. For work
/// that cannot move to another thread (a BPF skeleton is not `Send`), such as
/// attaching to an interface by ifindex, which the kernel resolves in the
/// caller's namespace.
pub fn with_netns<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T> {
    let home = File::open("/proc/thread-self/ns/net").context("opening this thread's namespace")?;
    let ns = File::open(path)
        .with_context(|| format!("opening network namespace {}", path.display()))?;
    // SAFETY: valid namespace fds; setns affects only this thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("entering {}", path.display()));
    }
    let out = f();
    // SAFETY: as above. Failing to return would leave this thread elsewhere.
    if unsafe { libc::setns(home.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        panic!(
            "cannot return to the original network namespace: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(out)
}

/// Inode of a namespace file: the identity the kernel reports (e.g. in
/// `ls -l /proc/PID/ns/net`).
pub fn inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino())
}
