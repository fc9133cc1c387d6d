//! Checks that run before the kernel is touched: privileges and kernel
//! features, each failing with what to do about it.

use std::path::Path;

use anyhow::{bail, Result};

const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

fn effective_caps() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Loading struct_ops and pinning in bpffs: CAP_BPF and CAP_NET_ADMIN (or
/// CAP_SYS_ADMIN, which covers both), and root's bpffs permissions.
pub fn require_root(what: &str) -> Result<()> {
    let caps = effective_caps();
    let has = |c: u32| caps & (1u64 << c) != 0;
    let privileged = has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_NET_ADMIN));
    if unsafe { libc::geteuid() } != 0 || !privileged {
        return Err(crate::error::Exit::no_permission(format!(
            "{what} needs root (CAP_BPF and CAP_NET_ADMIN, and write access to /sys/fs/bpf); \
             run it with sudo"
        )));
    }
    Ok(())
}

/// BTF of the running kernel: struct_ops programs are verified against it.
pub fn require_btf() -> Result<()> {
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!(
            "this kernel exposes no BTF (/sys/kernel/btf/vmlinux is missing); BPF congestion \
             control needs a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian, Ubuntu and \
             Fedora kernels since 2020 are)"
        );
    }
    Ok(())
}

/// BPF_PROG_TYPE_STRUCT_OPS (Linux 5.6+, with CONFIG_BPF_JIT and
/// CONFIG_BPF_SYSCALL). The struct_ops map type came in the same release;
/// libbpf's probe of it expects the error code of newer kernels (Debian's
/// 6.1 answers it otherwise and would be refused), so it is not asked.
pub fn require_struct_ops() -> Result<()> {
    let prog = libbpf_rs::ProgramType::StructOps
        .is_supported()
        .unwrap_or(false);
    if !prog {
        bail!(
            "this kernel cannot load BPF struct_ops (needs Linux 5.6 or later with \
             CONFIG_BPF_JIT=y); use a newer kernel, or the kernel's own dctcp module"
        );
    }
    Ok(())
}

/// struct_ops links (BPF_F_LINK) came with Linux 6.4; before, the
/// registration is held by the struct_ops map itself.
pub fn kernel_has_struct_ops_link() -> bool {
    kernel_version().is_some_and(|v| v >= (6, 4))
}

pub fn kernel_version() -> Option<(u32, u32)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut it = release.trim().split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Congestion controls the kernel has registered now.
pub fn registered_congestion_controls() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}
