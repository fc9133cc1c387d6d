//! Where attached algorithms live in bpffs:
//!
//! ```text
//! /sys/fs/bpf/dctcp-bpf/<name>/link            struct_ops link (kernels >= 6.4)
//! /sys/fs/bpf/dctcp-bpf/<name>/ops             struct_ops map  (map mode, older kernels)
//! /sys/fs/bpf/dctcp-bpf/<name>/fallback_link   the same for <name>_reno
//! /sys/fs/bpf/dctcp-bpf/<name>/fallback_ops
//! /sys/fs/bpf/dctcp-bpf/<name>/params          tunables, rewritten by `loader set`
//! /sys/fs/bpf/dctcp-bpf/<name>/stats           counters
//! ```
//!
//! A pinned link or map keeps the algorithm registered after the loader exits.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub const BPFFS: &str = "/sys/fs/bpf";
pub const ROOT: &str = "/sys/fs/bpf/dctcp-bpf";
/// Where a running lab pins its switch, one directory per lab prefix:
/// `<prefix>/queue_now` (the queue an arrival found, once per jiffy) and
/// `<prefix>/marker_stats` (the marker's per-CPU counters), read by `loader top`.
pub const LAB_ROOT: &str = "/sys/fs/bpf/dctcp-bpf-lab";

const BPF_FS_MAGIC: i64 = 0xcafe4a11;

/// The pins of one attached instance.
#[derive(Clone, Debug)]
pub struct InstanceDir {
    pub name: String,
    pub path: PathBuf,
}

impl InstanceDir {
    pub fn new(name: &str) -> Self {
        InstanceDir {
            name: name.to_string(),
            path: Path::new(ROOT).join(name),
        }
    }
    /// Sibling used while an instance is being attached or detached; `+`
    /// cannot start an instance name (bpffs refuses names with dots).
    pub fn staging(name: &str, what: &str) -> Self {
        InstanceDir {
            name: name.to_string(),
            path: Path::new(ROOT).join(format!("+{what}-{name}-{}", std::process::id())),
        }
    }

    pub fn link(&self) -> PathBuf {
        self.path.join("link")
    }
    pub fn ops(&self) -> PathBuf {
        self.path.join("ops")
    }
    pub fn fallback_link(&self) -> PathBuf {
        self.path.join("fallback_link")
    }
    pub fn fallback_ops(&self) -> PathBuf {
        self.path.join("fallback_ops")
    }
    pub fn params(&self) -> PathBuf {
        self.path.join("params")
    }
    pub fn stats(&self) -> PathBuf {
        self.path.join("stats")
    }
    /// What the programs trace and their event counters (struct dctcp_trace).
    pub fn trace(&self) -> PathBuf {
        self.path.join("trace")
    }
    /// The ring buffer of struct dctcp_event.
    pub fn events(&self) -> PathBuf {
        self.path.join("events")
    }
    /// The programs' read-only test hooks (guard.h's `fault_injection`),
    /// fixed at attach.
    pub fn test_hooks(&self) -> PathBuf {
        self.path.join("test_hooks")
    }
    pub fn exists(&self) -> bool {
        self.path.is_dir()
    }
}

pub fn is_bpffs(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is NUL-terminated and st is a valid out-pointer.
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0) && st.f_type as i64 == BPF_FS_MAGIC
}

/// Mounts bpffs on /sys/fs/bpf if nothing is there yet, as bpftool does.
pub fn ensure_mounted() -> Result<()> {
    if is_bpffs(Path::new(BPFFS)) {
        return Ok(());
    }
    let status = std::process::Command::new("mount")
        .args(["-t", "bpf", "bpf", BPFFS])
        .status()
        .context("running mount -t bpf")?;
    anyhow::ensure!(
        status.success() && is_bpffs(Path::new(BPFFS)),
        "{BPFFS} is not a bpf filesystem and mounting one failed; try: mount -t bpf bpf {BPFFS}"
    );
    Ok(())
}

/// Every instance pinned under [`ROOT`], sorted by name.
pub fn instances() -> Result<Vec<InstanceDir>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(ROOT) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("reading {ROOT}")),
    };
    for entry in entries {
        let entry = entry?;
        // `+...`: an attach or detach under way (see `InstanceDir::staging`).
        let hidden = entry.file_name().to_string_lossy().starts_with(['.', '+']);
        if entry.file_type()?.is_dir() && !hidden {
            out.push(InstanceDir::new(&entry.file_name().to_string_lossy()));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Staging directories (`+attaching-<name>-<pid>`, `+detaching-...`) whose
/// process is gone: an attach or detach killed before it could clean up.
pub fn abandoned_staging() -> Vec<InstanceDir> {
    let Ok(entries) = std::fs::read_dir(ROOT) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let rest = file.strip_prefix('+')?;
            let (what_name, pid) = rest.rsplit_once('-')?;
            let (_, name) = what_name.split_once('-')?;
            let pid: u32 = pid.parse().ok()?;
            (!Path::new(&format!("/proc/{pid}")).exists()).then(|| InstanceDir {
                name: name.to_string(),
                path: e.path(),
            })
        })
        .collect()
}
