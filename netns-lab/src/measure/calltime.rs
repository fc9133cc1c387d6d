//! A function's time per call by fentry and fexit (`src/bpf/calltime.bpf.c`):
//! the kernel's own functions and BPF programs timed by one method, for
//! `lab bench`'s comparison of bpf_dctcp with the kernel's dctcp.

use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;

use anyhow::{Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle};

dctcp_utils::skeleton!(calltime);

mod intf {
    #![allow(non_camel_case_types, non_upper_case_globals, dead_code, clippy::all)]
    include!(concat!(env!("OUT_DIR"), "/intf.rs"));
}

/// One function timed while this value lives.
pub struct CallTimer {
    _links: [Link; 2],
    times: MapHandle,
}

/// Calls completed and the time they took, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timed {
    pub calls: u64,
    pub ns: u64,
}

impl CallTimer {
    /// Times kernel function `func` (vmlinux or a loaded module, as BTF has it).
    pub fn kernel(func: &str) -> Result<CallTimer> {
        Self::attach(0, func).with_context(|| format!("timing kernel function {func}"))
    }

    /// Times the BPF program with id `id`.
    pub fn program(id: u32) -> Result<CallTimer> {
        let func = program_function(id)?;
        let fd = libbpf_rs::Program::fd_from_id(id).with_context(|| format!("BPF program {id}"))?;
        Self::attach(fd.as_raw_fd(), &func)
            .with_context(|| format!("timing BPF program {id} ({func})"))
    }

    fn attach(prog_fd: i32, func: &str) -> Result<CallTimer> {
        let mut storage = MaybeUninit::uninit();
        let mut open = calltime::CalltimeSkelBuilder::default().open(&mut storage)?;
        open.progs
            .call_enter
            .set_attach_target(prog_fd, Some(func.to_string()))?;
        open.progs
            .call_leave
            .set_attach_target(prog_fd, Some(func.to_string()))?;
        let skel = open.load().context(
            "loading fentry/fexit: they need a kernel with ftrace (CONFIG_FUNCTION_TRACER, direct \
             calls); the VM tier's Debian kernels have it",
        )?;
        Ok(CallTimer {
            _links: [
                skel.progs.call_enter.attach()?,
                skel.progs.call_leave.attach()?,
            ],
            times: MapHandle::try_from(&skel.maps.times)?,
        })
    }

    /// What was timed so far.
    pub fn read(&self) -> Result<Timed> {
        let per_cpu = self
            .times
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
            .context("call timer: empty map")?;
        let t: intf::call_time = dctcp_utils::bytes::sum_per_cpu(&per_cpu)
            .context("call timer: a value shorter than the struct")?;
        Ok(Timed {
            calls: t.calls,
            ns: t.ns,
        })
    }
}

/// The function a BPF program was written as (its BTF name, which the
/// kernel's 15-character program name cuts short).
fn program_function(id: u32) -> Result<String> {
    let opts = libbpf_rs::query::ProgInfoQueryOptions::default().include_func_info(true);
    let info = libbpf_rs::query::ProgInfoIter::with_query_opts(opts)
        .find(|p| p.id == id)
        .with_context(|| format!("no BPF program {id}"))?;
    let type_id = info
        .func_info
        .first()
        .with_context(|| format!("BPF program {id} has no BTF function"))?
        .type_id;
    let btf = libbpf_rs::btf::Btf::from_prog_id(id)?;
    let func: libbpf_rs::btf::types::Func<'_> = btf
        .type_by_id(libbpf_rs::btf::TypeId::from(type_id))
        .with_context(|| format!("BPF program {id}: BTF type {type_id} is not a function"))?;
    Ok(func
        .name()
        .with_context(|| format!("BPF program {id}: an unnamed function"))?
        .to_string_lossy()
        .into_owned())
}
