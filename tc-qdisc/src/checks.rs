//! What this kernel offers the lab, and for each missing piece what works
//! instead (`lab doctor`).

use serde::Serialize;

use crate::tc::tc;

#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub feature: &'static str,
    pub available: bool,
    /// What it is for, or what to use when it is missing.
    pub note: String,
}

fn check(feature: &'static str, available: bool, yes: &str, no: &str) -> Check {
    Check {
        feature,
        available,
        note: if available { yes } else { no }.to_string(),
    }
}

/// Kernel-level checks that need no scratch namespace.
pub fn kernel_checks() -> Vec<Check> {
    let version = dctcp_utils::preflight::kernel_version().unwrap_or((0, 0));
    let btf = std::path::Path::new("/sys/kernel/btf/vmlinux").exists();
    let struct_ops = libbpf_rs::ProgramType::StructOps
        .is_supported()
        .unwrap_or(false);
    let dctcp = kernel_dctcp_available();
    let switch_loads = switch_program_loads();
    vec![
        check(
            "BTF",
            btf,
            "/sys/kernel/btf/vmlinux",
            "kernel without CONFIG_DEBUG_INFO_BTF: BPF congestion control cannot load",
        ),
        check(
            "struct_ops",
            btf && struct_ops,
            "loader attach works",
            "use the kernel's dctcp module (VM tier)",
        ),
        check(
            "struct_ops link",
            version >= (6, 4),
            "attach --mode link (default)",
            "attach --mode map pins the struct_ops map instead (automatic)",
        ),
        check(
            "lab",
            version >= crate::marker::LAB_KERNEL,
            "namespaces, shaper, probes and receiver counters run here",
            &format!(
                "needs Linux {}.{} or later: the lab's experiments refuse to run here (the loader \
                 may run)",
                crate::marker::LAB_KERNEL.0,
                crate::marker::LAB_KERNEL.1
            ),
        ),
        check(
            "BPF markers (tcx, bpf_cast_to_kern_ctx)",
            version >= crate::marker::MARKER_KERNEL && switch_loads,
            "bpf-step, bpf-red, bpf-dual, bpf-dualpi2; the queue probe on tcx egress",
            "need Linux 6.6+: the kernel's red (a step at K) and fq_codel mark instead, and the \
             queue probe runs on tracepoint net_dev_queue",
        ),
        check(
            "tcx",
            crate::hook::has_tcx(),
            "faults and the receiver's counter attach to tcx",
            "clsact (cls_bpf filters) carries the faults and the receiver's counter instead",
        ),
        check(
            "tcp_dctcp",
            dctcp,
            "the kernel's own dctcp, for side-by-side runs against bpf_dctcp",
            "not in this kernel: compare against it in the stock-kernel VM (just vm-test)",
        ),
    ]
}

/// Whether the kernel's `dctcp` is registered or loads on demand.
fn kernel_dctcp_available() -> bool {
    if dctcp_utils::preflight::registered_congestion_controls()
        .iter()
        .any(|c| c == "dctcp")
    {
        return true;
    }
    // Selecting it makes the kernel try to load the module.
    let Ok(sock) = std::net::TcpListener::bind("127.0.0.1:0") else {
        return false;
    };
    use std::os::fd::AsFd;
    dctcp_utils::sockopt::set_congestion(sock.as_fd(), "dctcp").is_ok()
}

/// Loads (without attaching) the switch's tcx programs: proves the verifier
/// accepts bpf_cast_to_kern_ctx and the qdisc fields they read.
fn switch_program_loads() -> bool {
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    crate::skel::quietly(|| {
        let mut storage = std::mem::MaybeUninit::uninit();
        let loaded = crate::skel::SwitchSkelBuilder::default()
            .open(&mut storage)
            .and_then(|mut o| {
                o.progs.bottleneck_arrival.set_autoload(false);
                o.load()
            })
            .is_ok();
        loaded
    })
}

/// Qdisc checks: installs each as root qdisc on `dev` in the scratch
/// namespace `ns` (which the caller creates and removes).
pub fn qdisc_checks(ns: &str, dev: &str) -> Vec<Check> {
    let try_qdisc = |args: &[&str]| {
        let mut full = vec!["qdisc", "replace", "dev", dev, "root"];
        full.extend_from_slice(args);
        let ok = tc(ns, &full).is_ok();
        let _ = tc(ns, &["qdisc", "del", "dev", dev, "root"]);
        ok
    };
    let red = try_qdisc(&[
        "red",
        "limit",
        "400000",
        "min",
        "30000",
        "max",
        "35000",
        "avpkt",
        "1500",
        "burst",
        "21",
        "bandwidth",
        "100mbit",
        "probability",
        "1",
        "ecn",
    ]);
    let fq_codel = try_qdisc(&["fq_codel", "ce_threshold", "1ms"]);
    let netem = try_qdisc(&["netem", "delay", "1ms"]);
    let htb = try_qdisc(&["htb", "default", "1"]);
    let tbf = try_qdisc(&[
        "tbf", "rate", "100mbit", "burst", "15000", "limit", "150000",
    ]);
    let instead = if crate::hook::has_tcx() {
        "use bpf-step or bpf-red here, or run the lab in the stock-kernel VM (just vm-test)"
    } else {
        "no marking backend on this kernel: the BPF markers need tcx (Linux 6.6)"
    };
    vec![
        check(
            "htb",
            htb,
            "the bottleneck shaper",
            "no shaper: the lab cannot run on this kernel",
        ),
        check("tbf", tbf, "alternative shaper", "htb is used"),
        check(
            "red",
            red,
            "backend red (Mininet-style step at K or classic RED)",
            instead,
        ),
        check(
            "fq_codel",
            fq_codel,
            "backend fq_codel (ce_threshold)",
            instead,
        ),
        check(
            "netem",
            netem,
            "--rtt adds its delay with netem here (--delay-backend auto picks it)",
            "--rtt adds its delay with the lab's delay element here (delayline: AF_PACKET between the \
             switch and the receiver; see the delay element check)",
        ),
    ]
}
