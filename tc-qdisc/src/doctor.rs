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
    let version = loader::preflight::kernel_version().unwrap_or((0, 0));
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
            "BPF switch (tcx, bpf_cast_to_kern_ctx)",
            version >= crate::marker::SWITCH_KERNEL && switch_loads,
            "bpf-step, bpf-red, droptail backends and the queue probe",
            "needs Linux 6.6+: the lab's experiments refuse to run here (the loader runs)",
        ),
        check(
            "fault injection (tcx)",
            version >= crate::marker::SWITCH_KERNEL,
            "lab --loss, --ack-loss, --ecn-bleach, --bleach-syn, --reorder",
            "needs Linux 6.6+ (tcx): faults cannot be injected on this kernel",
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
    if loader::preflight::registered_congestion_controls()
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
    loader::sockopt::set_congestion(sock.as_fd(), "dctcp").is_ok()
}

/// Loads (without attaching) the switch program: proves the verifier accepts
/// bpf_cast_to_kern_ctx and the qdisc fields it reads.
fn switch_program_loads() -> bool {
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    quietly(|| {
        let mut storage = std::mem::MaybeUninit::uninit();
        let loaded = crate::skel::SwitchSkelBuilder::default()
            .open(&mut storage)
            .and_then(|o| o.load())
            .is_ok();
        loaded
    })
}

/// Runs `f` with libbpf's messages off: a probe expected to fail on older
/// kernels must not print the verifier's log. Warnings go to stderr again
/// afterwards, as libbpf's own printer sends them.
fn quietly<T>(f: impl FnOnce() -> T) -> T {
    use libbpf_rs::PrintLevel;
    fn warn(_: PrintLevel, msg: String) {
        eprint!("{msg}");
    }
    let _ = libbpf_rs::set_print(None);
    let r = f();
    libbpf_rs::set_print(Some((PrintLevel::Warn, warn)));
    r
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
    let instead =
        "use bpf-step or bpf-red here, or run the lab in the stock-kernel VM (just vm-test)";
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
