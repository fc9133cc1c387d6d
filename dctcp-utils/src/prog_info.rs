//! What the kernel says about one loaded BPF program (`bpf_prog_info`):
//! the instructions the verifier processed, and the runs it skipped
//! because the program was already running on that CPU.

use std::os::fd::{AsRawFd, BorrowedFd};

use anyhow::{Context, Result};
use libbpf_rs::libbpf_sys::{bpf_obj_get_info_by_fd, bpf_prog_info};

/// `bpf_prog_info` of the program behind `fd`; `name` is for the error.
pub fn of(fd: BorrowedFd<'_>, name: &str) -> Result<bpf_prog_info> {
    let mut info = bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` is ours, `len` bytes long; the kernel writes at most
    // that many.
    let r = unsafe {
        bpf_obj_get_info_by_fd(
            fd.as_raw_fd(),
            (&mut info as *mut bpf_prog_info).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::from_raw_os_error(-r))
            .with_context(|| format!("asking the kernel about BPF program {name}"));
    }
    Ok(info)
}
