//! Names of lab objects: `dl` and five hex digits, e.g. `dl3fa2c`, then a
//! role (`dl3fa2c-rx` for a namespace, `dl3fa2cs1` for an interface). The
//! prefix is short enough to also name the lab's congestion-control instance
//! (10 characters at most). A lock file /run/dctcp-lab/<prefix> holds the
//! owning pid, so `lab cleanup` can tell a crashed run's leftovers from a lab
//! that is still running.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};

const TAG: &str = "dl";
const HEX: usize = 5;
pub const LOCK_DIR: &str = "/run/dctcp-lab";
/// Who holds htb's hysteresis mode on, and the value it had before
/// (`tc_qdisc::hysteresis`). Beside LOCK_DIR, whose files are all locks.
pub const HTB_STATE: &str = "/run/dctcp-lab.htb_hysteresis";

/// A lab's prefix, reserved by its lock file until dropped.
#[derive(Debug, PartialEq, Eq)]
pub struct Prefix(String);

fn random_hex() -> Result<String> {
    let mut b = [0u8; 3];
    fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    let n = (u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2])) & 0xfffff;
    Ok(format!("{n:05x}"))
}

fn lock_path(prefix: &str) -> PathBuf {
    PathBuf::from(LOCK_DIR).join(prefix)
}

impl Prefix {
    /// A prefix no other lab on this machine holds, reserved for this process.
    pub fn unique() -> Result<Prefix> {
        fs::create_dir_all(LOCK_DIR).with_context(|| format!("creating {LOCK_DIR}"))?;
        for _ in 0..64 {
            let name = format!("{TAG}{}", random_hex()?);
            let taken = std::path::Path::new("/run/netns")
                .read_dir()
                .is_ok_and(|mut d| {
                    d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with(&name)))
                });
            if taken {
                continue;
            }
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(lock_path(&name))
            {
                Ok(mut f) => {
                    writeln!(f, "{}", std::process::id())?;
                    return Ok(Prefix(name));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).context("creating the lab lock file"),
            }
        }
        anyhow::bail!("no free lab prefix after 64 tries; run `lab cleanup`")
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `<prefix>-<role>`: a namespace name.
    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.0)
    }

    /// `<prefix><role>`: an interface name (15 characters at most).
    pub fn ifname(&self, role: &str) -> String {
        let name = format!("{}{role}", self.0);
        assert!(
            name.len() <= 15,
            "interface name {name} longer than 15 characters"
        );
        name
    }

    /// The prefix of a lab object called `name`, if it is one.
    pub fn of(name: &str) -> Option<&str> {
        let rest = name.strip_prefix(TAG)?;
        let hex = rest.get(..HEX)?;
        hex.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            .then(|| &name[..TAG.len() + HEX])
    }

    /// Whether the lab that made `name` is still running.
    pub fn owner_alive(name: &str) -> bool {
        let Some(prefix) = Prefix::of(name) else {
            return false;
        };
        fs::read_to_string(lock_path(prefix))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
    }

    /// Lock files of labs whose process is gone.
    pub fn stale_locks() -> Vec<String> {
        let Ok(dir) = fs::read_dir(LOCK_DIR) else {
            return Vec::new();
        };
        dir.flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !Prefix::owner_alive(n))
            .collect()
    }

    pub fn remove_lock(prefix: &str) {
        let _ = fs::remove_file(lock_path(prefix));
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        Prefix::remove_lock(&self.0);
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        assert_eq!(Prefix::of("dl3fa2c-rx"), Some("dl3fa2c"));
        assert_eq!(Prefix::of("dl3fa2cs12"), Some("dl3fa2c"));
        assert_eq!(Prefix::of("dl3fa"), None);
        assert_eq!(Prefix::of("eth0"), None);
        assert_eq!(Prefix::of("dlXYZ12"), None);
    }
}
