//! Attaching the lab's tc programs to an interface in a namespace: through
//! tcx where the kernel has it (Linux 6.6), through a clsact qdisc's BPF
//! filters before that. The programs are the same: each returns TCX_NEXT
//! (-1, TC_ACT_UNSPEC to cls_bpf, which goes on to the next filter) or a
//! final verdict.

use std::ffi::CString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{anyhow, bail, Result};
use dctcp_utils::setns::with_netns;
use libbpf_rs::libbpf_sys;
use libbpf_rs::{AsRawLibbpf, Link, ProgramMut, TcHook, TcHookBuilder, TC_EGRESS, TC_INGRESS};

/// The first kernel with tcx.
pub const TCX_KERNEL: (u32, u32) = (6, 6);

/// Whether this kernel has tcx: below 6.6 programs go on clsact.
pub fn has_tcx() -> bool {
    dctcp_utils::preflight::kernel_version().is_some_and(|v| v >= TCX_KERNEL)
}

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

/// A program on a hook, detached when dropped (the clsact qdisc itself goes
/// with the interface: other filters may share it).
pub enum Attached {
    /// A BPF link: tcx, or a tracepoint.
    Link(Link),
    Clsact {
        hook: TcHook,
        ns: PathBuf,
    },
}

impl Drop for Attached {
    fn drop(&mut self) {
        if let Attached::Clsact { hook, ns } = self {
            // The namespace or the interface may be gone already, and the
            // filter with it.
            let _ = with_netns(ns, || hook.detach());
        }
    }
}

/// Attaches `prog` to interface `dev` in namespace `ns`, ingress or egress
/// as its section (`tcx/ingress`, `tcx/egress`) says, at `at` among the
/// programs already there: tcx on 6.6 and later, clsact before.
pub fn attach(prog: &ProgramMut<'_>, ns: &Path, dev: &str, at: Position) -> Result<Attached> {
    with_netns(ns, || {
        let idx = ifindex(dev)?;
        if has_tcx() {
            attach_tcx(prog, idx, dev, at).map(Attached::Link)
        } else {
            attach_clsact(prog, idx, dev, at).map(|hook| Attached::Clsact {
                hook,
                ns: ns.to_path_buf(),
            })
        }
    })?
}

/// Attaches the program pinned at `pin` to tcx egress of `dev` in namespace
/// `ns`, first in line; detached when the returned link is dropped. For
/// programs another process loaded (an algorithm's ECT(1) program).
pub fn attach_pinned_egress(pin: &Path, ns: &Path, dev: &str) -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let c = CString::new(pin.as_os_str().as_encoded_bytes())?;
    // SAFETY: a NUL-terminated path; a new fd or a negative error.
    let prog = unsafe { libbpf_sys::bpf_obj_get(c.as_ptr()) };
    if prog < 0 {
        bail!("opening {}: {}", pin.display(), std::io::Error::last_os_error());
    }
    // SAFETY: prog is a new fd we own.
    let prog = unsafe { OwnedFd::from_raw_fd(prog) };
    with_netns(ns, || {
        let idx = ifindex(dev)?;
        // SAFETY: zeroed is a valid bpf_link_create_opts; sz tells libbpf its size.
        let mut opts: libbpf_sys::bpf_link_create_opts = unsafe { std::mem::zeroed() };
        opts.sz = std::mem::size_of_val(&opts) as _;
        opts.flags = libbpf_sys::BPF_F_BEFORE;
        // SAFETY: a program fd and an interface of this namespace.
        let link = unsafe {
            libbpf_sys::bpf_link_create(
                std::os::fd::AsRawFd::as_raw_fd(&prog),
                idx as i32,
                libbpf_sys::BPF_TCX_EGRESS,
                &opts,
            )
        };
        if link < 0 {
            bail!(
                "attaching {} to tcx egress of {dev}: {}",
                pin.display(),
                std::io::Error::from_raw_os_error(-link)
            );
        }
        // SAFETY: a new link fd we own; closing it detaches.
        Ok(unsafe { OwnedFd::from_raw_fd(link) })
    })?
}

fn attach_tcx(prog: &ProgramMut<'_>, idx: u32, dev: &str, at: Position) -> Result<Link> {
    // SAFETY: zeroed is a valid bpf_tcx_opts; sz tells libbpf its size.
    let mut opts: libbpf_sys::bpf_tcx_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of_val(&opts) as _;
    if at == Position::First {
        // BPF_F_BEFORE with no program or link named: the head of the list.
        opts.flags = libbpf_sys::BPF_F_BEFORE;
    }
    // SAFETY: a loaded program; libbpf returns a new link or NULL.
    let ptr = unsafe {
        libbpf_sys::bpf_program__attach_tcx(prog.as_libbpf_object().as_ptr(), idx as i32, &opts)
    };
    let ptr = NonNull::new(ptr).ok_or_else(|| {
        anyhow!(
            "attaching {} to tcx of {dev}: {}",
            prog.name().to_string_lossy(),
            std::io::Error::last_os_error()
        )
    })?;
    // SAFETY: ptr is a valid link we now own.
    Ok(unsafe { Link::from_ptr(ptr) })
}

/// cls_bpf runs a hook's filters in ascending priority: each First goes
/// below every priority handed out so far and each Last above, so the order
/// is the one tcx would give.
fn clsact_priority(at: Position) -> u32 {
    static HANDED_OUT: AtomicU32 = AtomicU32::new(0);
    let n = HANDED_OUT.fetch_add(1, Ordering::Relaxed) % 16_000;
    match at {
        Position::First => 16_000 - n,
        Position::Last => 16_001 + n,
    }
}

fn attach_clsact(prog: &ProgramMut<'_>, idx: u32, dev: &str, at: Position) -> Result<TcHook> {
    // SAFETY: a program of this object, opened and loaded.
    let ingress =
        unsafe { libbpf_sys::bpf_program__expected_attach_type(prog.as_libbpf_object().as_ptr()) }
            == libbpf_sys::BPF_TCX_INGRESS;
    let mut hook = TcHookBuilder::new(prog.as_fd())
        .ifindex(idx as i32)
        .handle(1)
        .priority(clsact_priority(at))
        .hook(if ingress { TC_INGRESS } else { TC_EGRESS });
    let what = |e: libbpf_rs::Error| {
        anyhow!(
            "attaching {} to clsact {} of {dev} (this kernel has no tcx, Linux 6.6): {e}",
            prog.name().to_string_lossy(),
            if ingress { "ingress" } else { "egress" }
        )
    };
    // An interface that has its clsact already refuses a second one
    // (EEXIST, which create() takes for success); libbpf would print the
    // kernel's refusal all the same.
    crate::skel::quietly(|| hook.create()).map_err(what)?;
    hook.attach().map_err(what)?;
    Ok(hook)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clsact_priorities_order_firsts_before_and_lasts_after_all_earlier() {
        let a = clsact_priority(Position::Last);
        let b = clsact_priority(Position::First);
        let c = clsact_priority(Position::Last);
        let d = clsact_priority(Position::First);
        assert!(d < b && b < a && a < c, "{a} {b} {c} {d}");
        // One step per attach either way: 16,000 of them fit below and above.
        assert_eq!((b - d, c - a), (2, 2), "{a} {b} {c} {d}");
    }
}
