//! Attaching the lab's programs to tcx (Linux 6.6+), in a namespace.

use std::ffi::CString;
use std::path::Path;
use std::ptr::NonNull;

use anyhow::{anyhow, bail, Result};
use libbpf_rs::{AsRawLibbpf, Link, ProgramMut};
use loader::netns::with_netns;

/// Where on the hook a program goes among those already there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Position {
    /// After every program attached before it.
    Last,
    /// Before them: it sees the packet first (a fault, ahead of the
    /// receiver's counter, so that the counter sees what the fault left).
    First,
}

/// The index of interface `name` in the caller's namespace.
pub fn ifindex(name: &str) -> Result<u32> {
    let c = CString::new(name)?;
    // SAFETY: NUL-terminated name.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => bail!("no interface {name}: {}", std::io::Error::last_os_error()),
        i => Ok(i),
    }
}

/// Attaches `prog` to tcx of interface `dev` in namespace `ns`, ingress or
/// egress as its section says (tcx needs Linux 6.6; `lab doctor` says
/// whether this kernel has it).
pub fn attach(prog: &ProgramMut<'_>, ns: &Path, dev: &str, at: Position) -> Result<Link> {
    with_netns(ns, || -> Result<Link> {
        let idx = ifindex(dev)?;
        // SAFETY: zeroed is a valid bpf_tcx_opts; sz tells libbpf its size.
        let mut opts: libbpf_rs::libbpf_sys::bpf_tcx_opts = unsafe { std::mem::zeroed() };
        opts.sz = std::mem::size_of_val(&opts) as _;
        if at == Position::First {
            // BPF_F_BEFORE with no program or link named: the head of the list.
            opts.flags = libbpf_rs::libbpf_sys::BPF_F_BEFORE;
        }
        // SAFETY: a loaded program; libbpf returns a new link or NULL.
        let ptr = unsafe {
            libbpf_rs::libbpf_sys::bpf_program__attach_tcx(
                prog.as_libbpf_object().as_ptr(),
                idx as i32,
                &opts,
            )
        };
        let ptr = NonNull::new(ptr).ok_or_else(|| {
            anyhow!(
                "attaching {} to tcx of {dev}: {} (tcx needs Linux 6.6 or later)",
                prog.name().to_string_lossy(),
                std::io::Error::last_os_error()
            )
        })?;
        // SAFETY: ptr is a valid link we now own.
        Ok(unsafe { Link::from_ptr(ptr) })
    })?
}
