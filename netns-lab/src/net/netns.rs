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
    ip_output(args).map(drop)
}

/// As `ip`, returning what it printed.
fn ip_output(args: &[&str]) -> Result<String> {
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
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A helper binary of the lab (rpcgen, delayline): beside this one in a
/// build, in ../lib/dctcp-bpf/ once installed (`just install`, the .deb:
/// helpers stay off PATH, where Debian's rpcsvc-proto has its own rpcgen),
/// or, for a test binary in a build's deps/, one folder up.
pub fn sibling_binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("no directory of the running binary")?;
    let mut places = vec![dir.join(name), dir.join("../lib/dctcp-bpf").join(name)];
    if dir.ends_with("deps") {
        places.push(dir.join("..").join(name));
    }
    places
        .iter()
        .find(|p| p.exists())
        .cloned()
        .with_context(|| {
            format!(
            "{} is missing (looked in {} and {}): build the workspace (just build) or reinstall",
            name,
            dir.display(),
            dir.join("../lib/dctcp-bpf").display()
        )
        })
}

impl Netns {
    /// Creates the namespace with its loopback up and IPv6 off. The labs
    /// are IPv4 only, and IPv6's own chatter on a new link (duplicate
    /// address detection, router solicitations, MLD reports) would cross
    /// the bottleneck as packets without ECT, which a marking qdisc drops.
    pub fn create(name: &str) -> Result<Netns> {
        ip(&["netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        if std::path::Path::new("/proc/sys/net/ipv6").exists() {
            for scope in ["all", "default"] {
                ns.sysctl(&format!("net.ipv6.conf.{scope}.disable_ipv6"), "1")?;
            }
        }
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

    /// The hardware address of `dev` in this namespace.
    pub fn mac(&self, dev: &str) -> Result<String> {
        let out = ip_output(&["-n", &self.name, "-j", "link", "show", "dev", dev])?;
        let links: serde_json::Value = serde_json::from_str(&out)?;
        links[0]["address"]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("no address of {dev} in {}", self.name))
    }

    /// A permanent neighbour entry: `addr` is at `mac` through `dev`.
    pub fn pin_neighbour(&self, dev: &str, addr: &str, mac: &str) -> Result<()> {
        self.ip(&[
            "neigh",
            "replace",
            addr,
            "lladdr",
            mac,
            "dev",
            dev,
            "nud",
            "permanent",
        ])
    }

    /// Writes a sysctl of this namespace, e.g. `net.ipv4.tcp_ecn`.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        let path = PathBuf::from("/proc/sys").join(key.replace('.', "/"));
        let value = value.to_string();
        let shown = path.clone();
        dctcp_utils::setns::run_in(&self.path(), move || std::fs::write(&path, value))?
            .with_context(|| format!("writing {} in {}", shown.display(), self.name))
    }

    /// `bin` run in this namespace. It gets SIGTERM if the lab dies first
    /// (even by SIGKILL), so no helper outlives a killed run inside a
    /// namespace `lab cleanup` removes. nsenter execs `bin`, which keeps the
    /// death signal.
    pub fn command(&self, bin: &std::path::Path) -> Command {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new("nsenter");
        c.arg(format!("--net={}", self.path().display())).arg(bin);
        // SAFETY: prctl is async-signal-safe; nothing else runs before exec.
        unsafe {
            c.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        c
    }

    /// Runs `f` on a thread inside this namespace.
    pub fn spawn<T, F>(&self, f: F) -> Result<JoinHandle<std::io::Result<T>>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        dctcp_utils::setns::spawn_in(&self.path(), f)
    }

    /// Runs `f` inside this namespace and waits for it.
    pub fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        dctcp_utils::setns::run_in(&self.path(), f)
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
