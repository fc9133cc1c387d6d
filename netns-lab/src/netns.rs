//! A named network namespace (`/run/netns/<name>`), deleted when dropped.

use std::path::PathBuf;
use std::process::Command;
use std::thread::JoinHandle;

use anyhow::{bail, Context, Result};

pub struct Netns {
    name: String,
}

/// Runs `ip` with `args`; the error carries ip's own message.
pub fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running ip (install iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Netns {
    /// Creates the namespace with its loopback up.
    pub fn create(name: &str) -> Result<Netns> {
        ip(&["netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// `ip -n <name> ...`
    pub fn ip(&self, args: &[&str]) -> Result<()> {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Writes a sysctl of this namespace, e.g. `net.ipv4.tcp_ecn`.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        let path = PathBuf::from("/proc/sys").join(key.replace('.', "/"));
        let value = value.to_string();
        let shown = path.clone();
        loader::netns::run_in(&self.path(), move || std::fs::write(&path, value))?
            .with_context(|| format!("writing {} in {}", shown.display(), self.name))
    }

    /// Runs `f` on a thread inside this namespace.
    pub fn spawn<T, F>(&self, f: F) -> Result<JoinHandle<std::io::Result<T>>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        loader::netns::spawn_in(&self.path(), f)
    }

    /// Runs `f` inside this namespace and waits for it.
    pub fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        loader::netns::run_in(&self.path(), f)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace also destroys the veth ends inside it.
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            eprintln!("warning: {e}");
        }
    }
}
